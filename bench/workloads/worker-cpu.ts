import type { AnyWorkflow } from '../../dsl/index.js';
import type { Store, WorkflowRegistration } from '../../runtime/index.js';
import { measureDrain } from './drain.js';

/**
 * Worker CPU per step: `process.cpuUsage()` over a drain (from the worker's start to its last
 * `run-completed`) divided by the steps it completed. The throughput drains run their worker on
 * the bench's instrumented store, whose per-query classification (regular expressions over the
 * statement text, a latency timer per query) is harness cost; this measurement drains on the
 * runtime's plain `pg` store instead, so the process holds the worker and nothing else while it
 * drains — the enqueueing client is done before the worker starts, and the drain's `onEvent`
 * only counts. A warm-up drain on the same database first lets V8 compile the hot path, as it
 * has in any worker that has run for a while. User + system time of every thread of the
 * process, garbage collection included.
 */
export interface WorkerCpuRow {
  readonly workload: string;
  readonly concurrency: number;
  readonly steps: number;
  readonly seconds: number;
  readonly cpuMsPerStep: number;
  /** The kernel's part of {@link WorkerCpuRow.cpuMsPerStep} (system time: socket I/O). */
  readonly systemCpuMsPerStep: number;
}

export interface WorkerCpuOptions {
  readonly workload: string;
  readonly workflow: AnyWorkflow;
  readonly stepsPerRun: number;
  readonly registrations: readonly WorkflowRegistration[];
  readonly runs: number;
  readonly warmUpRuns: number;
  readonly concurrency: number;
  /** A fresh migrated database's stores (plain `pg`, not instrumented); closed by the caller. */
  readonly enqueueStore: Store;
  readonly workerStore: Store;
  /** Called once the measured drain's runs are enqueued, just before its worker starts (e.g. to start a profiler). */
  readonly beforeMeasuredDrain?: () => Promise<void>;
}

export async function measureWorkerCpu(o: WorkerCpuOptions): Promise<WorkerCpuRow> {
  const common = {
    workflow: o.workflow,
    registrations: o.registrations,
    concurrency: o.concurrency,
    enqueueStore: o.enqueueStore,
    workerStore: o.workerStore,
  };
  if (o.warmUpRuns > 0) await measureDrain({ ...common, runs: o.warmUpRuns });
  const m = await measureDrain({
    ...common,
    runs: o.runs,
    ...(o.beforeMeasuredDrain ? { beforeDrain: o.beforeMeasuredDrain } : {}),
  });
  if (m.failedSteps > 0 || m.errors.length > 0) {
    throw new Error(
      `worker CPU drain of ${o.workload} at concurrency ${o.concurrency}: ${m.failedSteps} failed step(s); ${m.errors.join('; ')}`,
    );
  }
  const steps = o.runs * o.stepsPerRun;
  return {
    workload: o.workload,
    concurrency: o.concurrency,
    steps,
    seconds: m.seconds,
    cpuMsPerStep: m.cpuMs / steps,
    systemCpuMsPerStep: m.systemCpuMs / steps,
  };
}

/** The Markdown table of {@link WorkerCpuRow}s (also what `LEDGERFLOW_BENCH_ONLY=cpu` prints). */
export function workerCpuTable(rows: readonly WorkerCpuRow[]): string {
  return [
    '| workload | concurrency | steps | seconds | worker CPU ms / step | of which system |',
    '|---|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.workload} | ${r.concurrency} | ${r.steps} | ${r.seconds.toFixed(2)} | ${r.cpuMsPerStep.toFixed(3)} | ${r.systemCpuMsPerStep.toFixed(3)} |`,
    ),
  ].join('\n');
}
