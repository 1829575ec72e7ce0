import type { CodegenBenchResult } from './codegen-bench.js';
import type { BenchEnvironment } from './environment.js';
import type { QueryClass } from './instrumented-pg-store.js';
import type { QueuedBacklogCost } from './workloads/queues.js';
import type { TelemetryOverhead } from './workloads/telemetry.js';
import type { FanOutResult, SleepingClaimCost } from './workloads/waits.js';
import type { WorkerCpuRow } from './workloads/worker-cpu.js';

/** A ratio measured in several rounds: the median over rounds, and the lowest and highest. */
export interface RatioRange {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

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
  /** CPU the worker's process spent per step (ms): with two cores shared with the server, a ceiling of its own. */
  readonly workerCpuMsPerStep?: number;
  /** Rollbacks seen by the server while the workload ran (fencing losers, conflicts, errors); summed over rounds. */
  readonly rollbacks?: number;
  /** Rounds this row is the median of (bench/throughput-rounds.ts); the other columns are the median round's. */
  readonly rounds?: number;
  /**
   * steps/s over the one-statement W0's commits/s measured in the same round at the same concurrency:
   * the median over rounds, and the lowest and highest.
   */
  readonly ratioToFloor?: RatioRange;
}

/**
 * One end-to-end measurement (bench/workloads/end-to-end.ts, bench/peers): clients start runs
 * in a closed loop while the engine executes them, from the first start to the last completion.
 */
export interface EndToEndRow {
  /** `ledgerflow` or the peer's name. */
  readonly engine: string;
  readonly workload: string;
  readonly clients: number;
  readonly workflows: number;
  readonly seconds: number;
  readonly workflowsPerSecond: number;
  readonly stepsPerSecond: number;
  /**
   * `xact_commit` delta of the engine's databases per workflow (warm-up runs counted), start-up and shutdown taken off.
   * NaN (with `walSyncsPerWorkflow` and `lifecycleCommits`) for an engine that keeps its state outside PostgreSQL (Restate):
   * the report shows a dash.
   */
  readonly commitsPerWorkflow: number;
  /** WAL syncs to disk per workflow (cluster-wide `pg_stat_wal.wal_sync`, start-up and shutdown taken off): the commits that cost an fsync. */
  readonly walSyncsPerWorkflow: number;
  /** Commits of one start-up and shutdown with no run in between (the engine's fixed cost, not in the per-workflow figure). */
  readonly lifecycleCommits: number;
  readonly rollbacks: number;
  /** Rounds this row is the median of (bench/peers/rounds.ts); the other columns are the median round's. */
  readonly rounds?: number;
  /**
   * ledgerflow's rows in bench:peers: its workflows/s over each peer's, taken within each round
   * (the engines measured back to back), by peer name.
   */
  readonly ratioTo?: Readonly<Record<string, RatioRange>>;
}

/**
 * What one step of one kind costs, from a single-step workflow of that kind drained at
 * concurrency 1 (so each claim takes exactly one run). Driver-side counts class every
 * transaction the worker sent; the server's `xact_commit` delta is the cross-check.
 */
export interface StepCostRow {
  readonly kind: string;
  readonly runs: number;
  /** Step commits (intent, result, failure) per step — the number the targets are about. */
  readonly stepCommitsPerStep: number;
  readonly claimCommitsPerRun: number;
  /** Polls that found nothing, lease renewals, start-up checks. */
  readonly otherCommitsPerRun: number;
  readonly serverCommitsPerRun: number;
  readonly roundTripsPerRun: number;
  /** Wall time per run, and the part of it spent waiting on each class of query. */
  readonly wallMsPerRun: number;
  readonly queryMsPerRun: Readonly<Record<QueryClass, number>>;
}

export interface LatencyPercentiles {
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** Start to first step (the top-level percentiles) and, when measured, start to result. */
export interface LatencyResult extends LatencyPercentiles {
  readonly arrivalsPerSecond: number;
  /** The closed-loop peak the arrival rate is half of (16 clients starting without the worker), when measured. */
  readonly peakPerSecond?: number;
  readonly runs: number;
  readonly seconds: number;
  readonly concurrency: number;
  /** From the scheduled start to `startAndWait` returning the completed run. */
  readonly toResult?: LatencyPercentiles;
}

export interface BenchResults {
  readonly environment: BenchEnvironment;
  readonly concurrencies: readonly number[];
  readonly stepsPerMeasurement: string;
  readonly totalSeconds: number;
  /** W0 as one statement: the floor every ratio uses. */
  readonly floor: readonly ThroughputRow[];
  /** The same writes as four statements in an explicit transaction, for comparison. */
  readonly floorAsTransaction: readonly ThroughputRow[];
  readonly durable: readonly ThroughputRow[];
  /** Worker CPU per step of W1 and W2 on the plain store, harness cost excluded (bench/workloads/worker-cpu.ts). */
  readonly workerCpu?: readonly WorkerCpuRow[];
  /** Starts included: c clients start and await runs while one worker executes them. */
  readonly endToEnd?: readonly EndToEndRow[];
  readonly stepCosts: readonly StepCostRow[];
  readonly latency?: LatencyResult;
  readonly pglite: readonly ThroughputRow[];
  readonly codegen?: CodegenBenchResult;
  /** Sleeping runs' cost to the claim, and fan-out start rate (bench/workloads/waits.ts). */
  readonly waits?: { readonly sleeping: SleepingClaimCost; readonly fanOut: FanOutResult };
  /** W1 through a queue that never limits it (same concurrency as `w1`), and a deep queued backlog. */
  readonly queues?: { readonly queued: ThroughputRow; readonly w1: ThroughputRow; readonly backlog: QueuedBacklogCost };
  /** W1 plain, with the OpenTelemetry API but no SDK, and traced through the SDK (bench/workloads/telemetry.ts). */
  readonly telemetry?: TelemetryOverhead;
  readonly notes: readonly string[];
}
