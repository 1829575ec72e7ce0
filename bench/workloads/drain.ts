import { performance } from 'node:perf_hooks';
import type { AnyWorkflow } from '../../dsl/index.js';
import { createClient } from '../../runtime/client/client.js';
import { createWorker, type Store, type TelemetryOptions, type WorkflowRegistration } from '../../runtime/index.js';

export interface DrainOptions {
  readonly workflow: AnyWorkflow;
  readonly registrations: readonly WorkflowRegistration[];
  readonly runs: number;
  readonly concurrency: number;
  /** Store the runs are enqueued through. */
  readonly enqueueStore: Store;
  /** Store the worker runs on (may be the same). Neither is closed here. */
  readonly workerStore: Store;
  /** Called between enqueueing and draining (e.g. to close the enqueue pool and read server counters). */
  readonly beforeDrain?: () => Promise<void>;
  /** Gives up (and says what went wrong) after this long. Default 300 000. */
  readonly timeoutMs?: number;
  /** The worker's `telemetry` option (default: the global providers, if any). */
  readonly telemetry?: TelemetryOptions;
  /** The worker's `groupCommit` option (default: the worker's default). */
  readonly groupCommit?: boolean;
}

export interface DrainMeasurement {
  readonly runs: number;
  readonly seconds: number;
  /** CPU time this process (the worker, and nothing else while draining) spent, in ms. */
  readonly cpuMs: number;
  /** The system (kernel) part of {@link DrainMeasurement.cpuMs}: socket reads and writes, mostly. */
  readonly systemCpuMs: number;
  /** Steps that failed (should be 0; a benchmark with failures is reported, not hidden). */
  readonly failedSteps: number;
  readonly errors: readonly string[];
}

/**
 * Enqueues `runs` runs, then lets one real worker with `concurrency` drain them all: from the
 * worker's start to its last `run-completed`. No NOTIFY-wakeups matter here: everything is
 * due before the worker starts.
 */
export async function measureDrain(options: DrainOptions): Promise<DrainMeasurement> {
  const client = createClient({ store: options.enqueueStore });
  let next = 0;
  const enqueue = async (): Promise<void> => {
    for (let i = next++; i < options.runs; i = next++) await client.start(options.workflow, { i });
  };
  await Promise.all(Array.from({ length: options.enqueueStore.kind === 'pg' ? 16 : 1 }, enqueue));
  await options.beforeDrain?.();

  let completed = 0;
  let failedSteps = 0;
  const errors: string[] = [];
  let finished!: () => void;
  const allDone = new Promise<void>((resolve) => (finished = resolve));
  const worker = createWorker({
    store: options.workerStore,
    workflows: options.registrations,
    concurrency: options.concurrency,
    leaseMs: 30_000,
    reconcileIntervalMs: 0,
    ...(options.telemetry !== undefined ? { telemetry: options.telemetry } : {}),
    ...(options.groupCommit !== undefined ? { groupCommit: options.groupCommit } : {}),
    onEvent: (event) => {
      if (event.type === 'run-completed' && ++completed === options.runs) finished();
      if (event.type === 'step-failed') failedSteps += 1;
      if (event.type === 'error' && errors.length < 5) errors.push(`${event.where}: ${event.error.message}`);
    },
  });
  const timeoutMs = options.timeoutMs ?? 300_000;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `drain of ${options.runs} ${options.workflow.name} runs timed out after ${timeoutMs} ms (${completed} completed; ${errors.join('; ') || 'no errors'})`,
          ),
        ),
      timeoutMs,
    );
  });
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  try {
    await worker.start();
    await Promise.race([allDone, timedOut]);
  } finally {
    clearTimeout(timer);
  }
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  await worker.stop();
  return {
    runs: options.runs,
    seconds,
    cpuMs: (cpu.user + cpu.system) / 1000,
    systemCpuMs: cpu.system / 1000,
    failedSteps,
    errors,
  };
}
