import type { BenchEnvironment } from './environment.js';

/** One throughput measurement at one concurrency. */
export interface ThroughputRow {
  readonly workload: string;
  readonly concurrency: number;
  /** Steps (or, for W0, step commits) completed in the measured interval. */
  readonly steps: number;
  readonly workflows?: number;
  readonly seconds: number;
  readonly stepsPerSecond: number;
  readonly workflowsPerSecond?: number;
  /** `xact_commit` delta of the workload's database divided by steps. */
  readonly commitsPerStep?: number;
  /** Queries sent by the worker's driver divided by steps. */
  readonly roundTripsPerStep?: number;
  /** Rollbacks seen by the server while the workload ran (fencing losers, conflicts, errors). */
  readonly rollbacks?: number;
}

/** Commit and round-trip cost of one step of one kind, from a single-step workflow of that kind. */
export interface StepCostRow {
  readonly kind: string;
  readonly runs: number;
  readonly commitsPerRun: number;
  readonly roundTripsPerRun: number;
  /** What the claim costs per run, measured separately, so the step's own cost can be shown. */
  readonly note: string;
}

export interface LatencyResult {
  readonly arrivalsPerSecond: number;
  readonly runs: number;
  readonly seconds: number;
  readonly concurrency: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface BenchResults {
  readonly environment: BenchEnvironment;
  readonly concurrencies: readonly number[];
  readonly stepsPerMeasurement: string;
  readonly totalSeconds: number;
  readonly floor: readonly ThroughputRow[];
  readonly durable: readonly ThroughputRow[];
  readonly stepCosts: readonly StepCostRow[];
  readonly latency?: LatencyResult;
  readonly pglite: readonly ThroughputRow[];
  /** Markdown from the codegen engineer's `runCodegenBench()`, when it exists. */
  readonly codegen?: string;
  readonly notes: readonly string[];
}
