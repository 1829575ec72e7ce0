import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { AnyWorkflow } from '../../dsl/index.js';
import { createClient } from '../../runtime/client/client.js';
import { createWorker, type WorkflowRegistration } from '../../runtime/index.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import type { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { countReservations, prepareBenchDatabase } from '../bench-database.js';
import { expectExactlyOnce, providerCounts } from '../exactly-once.js';
import type { BenchServer } from '../environment.js';
import type { EndToEndRow } from '../results-model.js';
import { readServerCounters, readWalSyncs } from '../server-stats.js';
import { plainOnly, threeStep } from './bench-workflows.js';

/**
 * The end-to-end workload: `clients` clients each start a run and wait for its result, then
 * start the next (a closed loop, as API handlers do), while one worker with the same
 * concurrency executes them. Timed from the first start to the last completion, so the cost of
 * starting (the insert, the claim) and of waiting is paid inside the measurement — unlike the
 * drains, which enqueue everything first.
 *
 * A client waits the way an application does: `client.startAndWait` (completion: 'startAndWait',
 * the default), or `client.start` and then `client.waitForRun` (`completion: 'startThenWait'`,
 * as an application that keeps the run id does). `completion: 'event'` instead learns of the completion from the worker's
 * `run-completed` event in this process (no query, no wait of the client's own): the floor the
 * wait is measured against (`LEDGERFLOW_BENCH_ONLY=wait`, bench/main.ts).
 * `completion: 'remoteStartAndWait'` is `startAndWait` through a client created WITHOUT the
 * worker, as an API server that leaves execution to a worker elsewhere: each start is an insert
 * and a NOTIFY, the worker claims the run, and the wait hears the settling commit's NOTIFY — the
 * path W3 measures, whose rate is half this one's peak.
 *
 * The client is created with the worker (`createClient({ store, worker })`), as an API server
 * that embeds its worker would be, like DBOS executing in the process that starts: a start
 * inserts its run already claimed for the worker while the worker has a slot free, and the
 * wait of a run that worker settles is answered in-process.
 */
/**
 * The two end-to-end workloads, the same on every engine (bench/peers/dbos/end-to-end.ts
 * builds their DBOS twins): one step returning a small object; and a step computing, one
 * application row written exactly once in a transactional step, then an in-process provider
 * called with an idempotency key.
 */
export const END_TO_END_WORKLOADS = [
  { id: 'one-step', label: 'one step', workflow: plainOnly, stepsPerRun: 1 },
  {
    id: 'three-step',
    label: 'three steps (compute, exactly-once write, keyed provider call)',
    workflow: threeStep,
    stepsPerRun: 3,
  },
] as const;

export type EndToEndWorkload = (typeof END_TO_END_WORKLOADS)[number];

/** How a client waits (see {@link ledgerflowEndToEnd}). */
export type EndToEndCompletion = 'startAndWait' | 'startThenWait' | 'event' | 'remoteStartAndWait';

/** Measures one workload on ledgerflow in a fresh database of `server`. */
export async function ledgerflowEndToEnd(
  server: BenchServer,
  o: {
    readonly workload: EndToEndWorkload;
    readonly clients: number;
    readonly runs: number;
    readonly warmUp: number;
    readonly registrations: readonly WorkflowRegistration[];
    /** The provider `registrations` call, if it is fresh for this measurement: its charges are checked too, not only the rows. */
    readonly payments?: FakePaymentProvider;
    readonly completion?: EndToEndCompletion;
  },
): Promise<EndToEndRow> {
  const database = `bench_e2e_${o.workload.id.replaceAll('-', '_')}_c${o.clients}`;
  const { url } = await prepareBenchDatabase(server, database);
  const options = {
    workflow: o.workload.workflow,
    registrations: o.registrations,
    clients: o.clients,
    url,
    database,
    adminUrl: server.adminUrl,
    ...(o.completion !== undefined ? { completion: o.completion } : {}),
  };
  // The same start-up and shutdown with no run in between: what the commit count subtracts.
  const lifecycle = await measureEndToEnd({ ...options, runs: 0, warmUp: 0 });
  const m = await measureEndToEnd({ ...options, runs: o.runs, warmUp: o.warmUp });
  expectExactlyOnce('ledgerflow', {
    workload: o.workload.id,
    workflows: m.countedRuns,
    reservations: await countReservations(url),
    ...(o.payments ? { provider: providerCounts(o.payments) } : {}),
  });
  return endToEndRow('ledgerflow', o.workload.label, o.clients, o.workload.stepsPerRun, m, lifecycle);
}

export interface EndToEndOptions {
  readonly workflow: AnyWorkflow;
  readonly registrations: readonly WorkflowRegistration[];
  /** Runs timed (after `warmUp` runs through the same clients and worker, not timed). */
  readonly runs: number;
  readonly warmUp: number;
  readonly clients: number;
  /** A migrated database with no session open on it (its `xact_commit` is read before and after). */
  readonly url: string;
  readonly database: string;
  readonly adminUrl: string;
  /** Gives up after this long. Default 300 000. */
  readonly timeoutMs?: number;
  /**
   * How a client learns its run is done: `startAndWait` (default), `start` then `waitForRun`, the
   * worker's `run-completed` event, or `startAndWait` through a client that does not know the worker.
   */
  readonly completion?: EndToEndCompletion;
}

export interface EndToEndMeasurement {
  readonly runs: number;
  readonly seconds: number;
  /** `xact_commit` delta of the database over the whole measurement (pools opened to pools closed), warm-up included. */
  readonly commits: number;
  readonly rollbacks: number;
  /** `pg_stat_wal.wal_sync` delta (cluster-wide) over the same span. */
  readonly walSyncs: number;
  /** Runs the counters cover: `runs + warmUp`. */
  readonly countedRuns: number;
}

export async function measureEndToEnd(options: EndToEndOptions): Promise<EndToEndMeasurement> {
  const before = await readServerCounters(options.adminUrl, options.database);
  const walSyncsBefore = await readWalSyncs(options.adminUrl);
  // One store for the client and the worker (a start claims for the worker in its transaction):
  // a connection per client plus the worker's.
  const store = createPgStore({ connectionString: options.url, maxConnections: 2 * options.clients + 2 });
  const waiting = new Map<string, { resolve: () => void; reject: (error: Error) => void }>();
  const errors: string[] = [];
  const worker = createWorker({
    store,
    workflows: options.registrations,
    concurrency: options.clients,
    leaseMs: 30_000,
    reconcileIntervalMs: 0,
    onEvent: (event) => {
      if (event.type === 'run-completed') waiting.get(event.runId)?.resolve();
      if (event.type === 'step-failed' && event.outcome.kind !== 'retry') {
        waiting
          .get(event.runId)
          ?.reject(new Error(`run ${event.runId} step ${event.step} ${event.outcome.kind}: ${event.error.message}`));
      }
      if (event.type === 'error' && errors.length < 5) errors.push(`${event.where}: ${event.error.message}`);
    },
  });
  const client = createClient(options.completion === 'remoteStartAndWait' ? { store } : { store, worker });
  const startAndAwait =
    options.completion === 'event'
      ? async (i: number): Promise<void> => {
          const runId = randomUUID();
          const done = new Promise<void>((resolve, reject) => waiting.set(runId, { resolve, reject }));
          await client.start(options.workflow, { i }, { runId });
          await done;
          waiting.delete(runId);
        }
      : async (i: number): Promise<void> => {
          const run =
            options.completion === 'startThenWait'
              ? await client.waitForRun((await client.start(options.workflow, { i })).runId, { timeoutMs: 60_000 })
              : await client.startAndWait(options.workflow, { i }, { wait: { timeoutMs: 60_000 } });
          if (run.status !== 'completed')
            throw new Error(`run ${run.id} ended ${run.status}: ${JSON.stringify(run.error)}`);
        };
  const closedLoop = async (from: number, to: number): Promise<void> => {
    let next = from;
    const loop = async (): Promise<void> => {
      for (let i = next++; i < to; i = next++) await startAndAwait(i);
    };
    await Promise.all(Array.from({ length: options.clients }, loop));
  };
  const timeoutMs = options.timeoutMs ?? 300_000;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `end-to-end ${options.workflow.name} with ${options.clients} clients timed out after ${timeoutMs} ms (${errors.join('; ') || 'no worker errors'})`,
          ),
        ),
      timeoutMs,
    );
  });
  try {
    await worker.start();
    await Promise.race([closedLoop(0, options.warmUp), timedOut]);
    const started = performance.now();
    await Promise.race([closedLoop(options.warmUp, options.warmUp + options.runs), timedOut]);
    const seconds = (performance.now() - started) / 1000;
    await worker.stop();
    await store.close();
    const after = await readServerCounters(options.adminUrl, options.database);
    const walSyncs = (await readWalSyncs(options.adminUrl)) - walSyncsBefore;
    return {
      runs: options.runs,
      seconds,
      commits: after.commits - before.commits,
      rollbacks: after.rollbacks - before.rollbacks,
      walSyncs,
      countedRuns: options.runs + options.warmUp,
    };
  } finally {
    clearTimeout(timer);
    await worker.stop().catch(() => {});
    await store.close().catch(() => {});
  }
}

/**
 * One table row from a measurement; `stepsPerRun` turns workflows/s into steps/s, and
 * `lifecycle` (a start-up and shutdown with no run) is taken off the commit and WAL sync counts.
 */
export function endToEndRow(
  engine: string,
  workload: string,
  clients: number,
  stepsPerRun: number,
  m: EndToEndMeasurement,
  lifecycle: Pick<EndToEndMeasurement, 'commits' | 'walSyncs'>,
): EndToEndRow {
  return {
    engine,
    workload,
    clients,
    workflows: m.runs,
    seconds: m.seconds,
    workflowsPerSecond: m.runs / m.seconds,
    stepsPerSecond: (m.runs * stepsPerRun) / m.seconds,
    commitsPerWorkflow: (m.commits - lifecycle.commits) / m.countedRuns,
    walSyncsPerWorkflow: (m.walSyncs - lifecycle.walSyncs) / m.countedRuns,
    lifecycleCommits: lifecycle.commits,
    rollbacks: m.rollbacks,
  };
}
