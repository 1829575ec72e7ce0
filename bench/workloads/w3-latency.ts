import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createClient } from '../../runtime/client/client.js';
import { createWorker, type Store, type WorkflowRegistration } from '../../runtime/index.js';
import type { LatencyPercentiles, LatencyResult } from '../results-model.js';
import { latencyProbe } from './bench-workflows.js';

export interface LatencyOptions {
  readonly arrivalsPerSecond: number;
  readonly seconds: number;
  readonly concurrency: number;
  readonly clientStore: Store;
  readonly workerStore: Store;
  readonly registrations: readonly WorkflowRegistration[];
}

/**
 * W3: start-to-first-step and start-to-result latency under an open-loop arrival rate. Starts
 * are issued on a fixed schedule whether or not earlier ones finished (so a slow system cannot
 * slow the arrivals down and flatter itself), each with `client.startAndWait` as an API handler
 * answering with the result would. Latency runs from each start's *scheduled* time to the commit
 * of its run's (one) step, as the worker reports it, and to `startAndWait` returning the settled
 * run (woken by the settle's notification, then the run read back). The worker is idle between
 * arrivals, so what is measured includes its LISTEN/NOTIFY wake-up.
 */
export async function measureLatency(options: LatencyOptions): Promise<LatencyResult> {
  const client = createClient({ store: options.clientStore });
  const scheduledAt = new Map<string, number>();
  const latencies: number[] = [];
  const resultLatencies: number[] = [];
  const total = Math.max(1, Math.round(options.arrivalsPerSecond * options.seconds));
  let finished!: () => void;
  const allDone = new Promise<void>((resolve) => (finished = resolve));
  const worker = createWorker({
    store: options.workerStore,
    workflows: options.registrations,
    concurrency: options.concurrency,
    leaseMs: 30_000,
    reconcileIntervalMs: 0,
    onEvent: (event) => {
      if (event.type !== 'step-succeeded' || event.step !== 'first') return;
      const at = scheduledAt.get(event.runId);
      if (at === undefined) return;
      latencies.push(performance.now() - at);
      if (latencies.length === total) finished();
    },
  });
  await worker.start();
  // One start to warm connections and the worker's wake-up path; not measured.
  await client.start(latencyProbe, { i: 0 });
  await new Promise((resolve) => setTimeout(resolve, 200));

  const intervalMs = 1000 / options.arrivalsPerSecond;
  const t0 = performance.now() + 50;
  const starts: Promise<unknown>[] = [];
  for (let k = 0; k < total; k++) {
    const due = t0 + k * intervalMs;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    const runId = randomUUID();
    scheduledAt.set(runId, due);
    starts.push(
      client.startAndWait(latencyProbe, { i: k + 1 }, { runId, wait: { timeoutMs: 60_000 } }).then((run) => {
        if (run.status !== 'completed') throw new Error(`W3: run ${runId} ended ${run.status}`);
        resultLatencies.push(performance.now() - due);
      }),
    );
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    allDone,
    new Promise<void>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`W3: only ${latencies.length} of ${total} first steps committed within 60 s`)),
        60_000,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  await Promise.all(starts);
  const seconds = (performance.now() - t0) / 1000;
  await worker.stop();
  return {
    arrivalsPerSecond: options.arrivalsPerSecond,
    runs: total,
    seconds,
    concurrency: options.concurrency,
    ...percentiles(latencies),
    toResult: percentiles(resultLatencies),
  };
}

function percentiles(latencies: number[]): LatencyPercentiles {
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { p50Ms: at(0.5), p90Ms: at(0.9), p99Ms: at(0.99), maxMs: latencies[latencies.length - 1] ?? NaN };
}
