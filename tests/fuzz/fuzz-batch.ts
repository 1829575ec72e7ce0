import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { startJsonServer } from '../../examples/fakes/json-http.js';
import { createClient, type Client } from '../../runtime/client/client.js';
import { WaitTimeoutError } from '../../runtime/errors.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { createWorker, type Worker } from '../../runtime/worker/worker.js';
import { setPayloadLimits } from '../../runtime/limits/payload-limits.js';
import { pruneRuns } from '../../runtime/retention/prune.js';
import { FINAL_RUN_STATUSES, type FinalRunStatus } from '../../runtime/store/tables.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { seededRandom, type SeededRandom } from '../chaos/seeded-random.js';
import { CHAOS_APPLICATION_PREFIX, WorkerFleet } from '../chaos/worker-fleet.js';
import { composeWorkflows, FUZZ_LEASE_MS, FUZZ_MAX_OUTPUT_BYTES, type Composition } from './compose.js';
import { FuzzDesk, fuzzDeskRoutes, HttpFuzzDesk } from './fuzz-desk.js';
import { FUZZ_APP_SQL, fuzzRegistrations } from './fuzz-handlers.js';
import { checkBatch, readRunFacts, sampleQueueRows, type RunFacts, type Violation } from './fuzz-checks.js';

/**
 * One batch of the composition fuzzer: several compositions (each its own workflows, queue and
 * runs) on one fresh PostgreSQL database with one fleet of worker child processes, driven for a
 * few seconds by random operator actions and faults, settled without faults, then checked.
 * About a third of the runs are started the way an API server that embeds its worker starts
 * them: `startAndWait` through a client created with a worker in the driver's process (a start
 * it may hand to that worker uninserted, its insert riding on the run's first commit), the rest
 * by `client.start` with the tag as dedupe key; the fleet and the driver's worker serve both.
 * Everything random is drawn from the batch seed and the compositions' own seeds, so a batch
 * replays from its first seed (the timing of processes is not replayed: a seed that found a
 * violation finds it again often, not always).
 */
export interface BatchOptions {
  /** The compositions' seeds: the batch's random stream is seeded with the first. */
  readonly seeds: readonly number[];
  readonly workers: number;
  readonly concurrency: number;
  /** How long actions and faults go on. */
  readonly activeMs: number;
  /** After the faults stop, how long runs may make no progress at all before it counts as waiting forever. */
  readonly settleMs: number;
  readonly log: (line: string) => void;
}

export interface BatchCounts {
  compositions: number;
  runs: number;
  actions: Record<string, number>;
  faults: Record<string, number>;
  checks: Record<string, number>;
}

export interface BatchOutcome {
  readonly counts: BatchCounts;
  readonly violations: readonly Violation[];
}

const WORKER_ENTRY = fileURLToPath(new URL('./fixtures/fuzz-worker.ts', import.meta.url));
const NOTE = { actor: 'fuzzer', reason: 'composition fuzzer action' } as const;

/** What the driver did to a run: the checks explain a run's status with it. */
export interface RunLog {
  readonly composition: Composition;
  readonly tag: string;
  /** Started by `startAndWait` through the driver's worker; what it answered, once it did. */
  local?: { runId?: string; status?: string };
  cancelled: boolean;
  cancelledWithCompensate: boolean;
  retried: number;
  eventSent: boolean;
}

export async function runBatch(options: BatchOptions): Promise<BatchOutcome> {
  const random = seededRandom(options.seeds[0]! ^ 0x5eed);
  const compositions = options.seeds.map(composeWorkflows);
  const counts: BatchCounts = { compositions: compositions.length, runs: 0, actions: {}, faults: {}, checks: {} };
  const count = (what: Record<string, number>, kind: string, n = 1): void => {
    what[kind] = (what[kind] ?? 0) + n;
  };

  const store = await createPgTestStore({ maxConnections: 6 });
  let fleet: WorkerFleet | undefined;
  let localWorker: Worker | undefined;
  let closeLocal = async (): Promise<void> => {};
  let server: Awaited<ReturnType<typeof startJsonServer>> | undefined;
  try {
    await migrateForTest(
      store,
      compositions.flatMap((c) => [c.kid, c.root]),
    );
    await sql.raw(FUZZ_APP_SQL).execute(store.db);
    await setPayloadLimits(store.db, { maxOutputBytes: FUZZ_MAX_OUTPUT_BYTES });
    const desk = new FuzzDesk((worker) => {
      if (fleet?.killNamed(worker)) count(counts.faults, 'sigkill-after-apply');
    });
    server = await startJsonServer([fuzzDeskRoutes(desk)]);
    const deskUrl = server.url;
    fleet = new WorkerFleet({
      size: options.workers,
      random,
      log: options.log,
      entry: WORKER_ENTRY,
      onExit: (name) => desk.workerDied(name),
      env: () => ({
        DATABASE_URL: store.url!,
        FUZZ_DESK_URL: deskUrl,
        FUZZ_SEEDS: options.seeds.join(','),
        FUZZ_CONCURRENCY: String(options.concurrency),
      }),
    });
    fleet.start();
    // The client only starts, cancels and reads: handlers bound to a desk nobody calls.
    const idle = new HttpFuzzDesk(deskUrl, 'client');
    const client = createClient({ store, workflows: compositions.flatMap((c) => fuzzRegistrations(c, idle)) });
    // A worker in this process and a client that knows it: the starts an embedding API server makes.
    const localWaits: Promise<void>[] = [];
    const localStore = createPgStore({
      connectionString: store.url!,
      applicationName: `${CHAOS_APPLICATION_PREFIX}driver`,
      maxConnections: options.concurrency + 3,
    });
    localWorker = createWorker({
      store: localStore,
      workflows: compositions.flatMap((c) => fuzzRegistrations(c, new HttpFuzzDesk(deskUrl, 'driver'))),
      childrenPerCommit: 2,
      workerId: 'fuzz-driver',
      concurrency: options.concurrency,
      leaseMs: FUZZ_LEASE_MS,
      pollIntervalMs: 100,
      reconcileIntervalMs: 300,
    });
    closeLocal = async () => {
      await localWorker?.stop({ timeoutMs: 5_000 }).catch(() => undefined);
      await Promise.all(localWaits);
      await localStore.close().catch(() => undefined);
    };
    await localWorker.start();
    const localClient = createClient({ store: localStore, worker: localWorker });

    const logs = new Map<string, RunLog>();
    const violations: Violation[] = [];
    const snapshots = new Map<string, RunFacts>();
    const timeline: Array<{ at: number; act: () => Promise<void> }> = [];
    const at = (ms: number, act: () => Promise<void>): void => {
      timeline.push({ at: ms, act });
    };

    for (const composition of compositions) {
      const rnd = seededRandom(composition.seed ^ 0xac7);
      for (const run of composition.runs) {
        const log: RunLog = {
          composition,
          tag: run.tag,
          cancelled: false,
          cancelledWithCompensate: false,
          retried: 0,
          eventSent: false,
        };
        logs.set(run.tag, log);
        const startAt = rnd.int(0, 400);
        // Its own stream, so that the draws above and below stay those every seed always had.
        const local = seededRandom(composition.seed ^ 0x10ca1 ^ composition.runs.indexOf(run)).next() < 0.35;
        if (local) log.local = {};
        at(startAt, async () => {
          if (local) {
            // Not awaited: the timeline goes on while the run is waited for, as other requests do.
            localWaits.push(
              localClient
                .startAndWait(
                  composition.root,
                  { tag: run.tag, flags: run.flags, part: run.part, failKids: run.failKids },
                  { wait: { timeoutMs: 20_000 } },
                )
                .then(
                  (answer) => void (log.local = { runId: answer.id, status: answer.status }),
                  (error: unknown) => {
                    const runId = /Run ([0-9a-f-]{36})/.exec((error as Error).message)?.[1];
                    if (error instanceof WaitTimeoutError && runId !== undefined) log.local = { runId };
                    else options.log(`local start of ${run.tag} failed: ${(error as Error).message}`);
                  },
                ),
            );
            counts.runs += 1;
            count(counts.actions, 'start-and-wait-local');
            return;
          }
          await client.start(
            composition.root,
            { tag: run.tag, flags: run.flags, part: run.part, failKids: run.failKids },
            { dedupeKey: run.tag },
          );
          counts.runs += 1;
          count(counts.actions, 'start');
        });
        if (run.eventAtMs !== undefined && composition.steps.some((s) => s.kind === 'wait')) {
          at(startAt + run.eventAtMs, async () => {
            await client.sendEvent(composition.eventName, run.tag, { note: run.tag }, { dedupeKey: `ev:${run.tag}` });
            log.eventSent = true;
            count(counts.actions, 'send-event');
          });
        }
        if (rnd.next() < 0.35) {
          const compensate = rnd.next() < 0.5;
          at(startAt + rnd.int(50, 2_500), async () => {
            const id = await runIdOf(store, composition, run.tag);
            if (id === undefined) return;
            const done = await client.cancel(id, { compensate, ...NOTE }).catch(() => false);
            if (done) {
              log.cancelled = true;
              if (compensate) log.cancelledWithCompensate = true;
            }
            count(counts.actions, compensate ? 'cancel-compensate' : 'cancel');
          });
        }
        if (rnd.next() < 0.3) {
          at(startAt + rnd.int(500, 3_000), async () => {
            if (await retryIfStopped(client, store, composition, run.tag, log)) count(counts.actions, 'retry');
          });
        }
      }
      const q = composition.queue;
      if (q !== undefined && rnd.next() < 0.3) {
        const from = rnd.int(0, 1_500);
        at(from, async () => {
          await client.pauseQueue(q.definition.name, NOTE).catch(() => false);
          count(counts.actions, 'pause-queue');
        });
        at(from + rnd.int(100, 1_000), async () => {
          await client.resumeQueue(q.definition.name, NOTE).catch(() => false);
          count(counts.actions, 'resume-queue');
        });
      }
    }
    // Operator actions and faults over the whole batch.
    const prune = async (): Promise<void> => {
      for (const facts of await readRunFacts(store.db))
        if (FINAL_RUN_STATUSES.includes(facts.status as FinalRunStatus)) snapshots.set(facts.id, facts);
      const statuses = FINAL_RUN_STATUSES.filter(() => random.next() < 0.5);
      await pruneRuns(store.db, { olderThanMs: 0, ...(statuses.length > 0 ? { statuses } : {}) });
      count(counts.actions, 'prune');
    };
    for (let i = random.int(0, 2); i > 0; i--) at(random.int(500, options.activeMs), prune);
    for (let i = random.int(1, 3); i > 0; i--)
      at(random.int(300, options.activeMs), async () => void (await resolveParked(client, store, desk, counts)));
    for (let i = random.int(1, 3); i > 0; i--) {
      at(random.int(300, options.activeMs), async () => {
        if (fleet!.killRandom()) count(counts.faults, 'sigkill');
      });
    }
    for (let i = random.int(1, 3); i > 0; i--) {
      at(random.int(200, options.activeMs), async () =>
        count(counts.faults, 'pg-terminate-backend', await terminateBackend(store, random)),
      );
    }
    if (random.next() < 0.5) {
      at(random.int(300, options.activeMs), async () => {
        if (fleet!.freezeRandom(FUZZ_LEASE_MS + 700)) count(counts.faults, 'lease-expiry-sigstop');
      });
    }

    timeline.sort((a, b) => a.at - b.at);
    // Workers take seconds to boot on a loaded machine: the clock of the timeline starts once they claim.
    const booting = performance.now();
    while (fleet.readyCount < options.workers && performance.now() - booting < 60_000) await sleep(100);
    const started = performance.now();
    let stopSampling = false;
    const seen = new Set<string>();
    const sampling = (async () => {
      while (!stopSampling) {
        for (const v of await sampleQueueRows(store.db, compositions).catch(() => [])) {
          if (!seen.has(v.message)) violations.push(v);
          seen.add(v.message);
        }
        count(counts.checks, 'queue-row-samples');
        await sleep(150);
      }
    })();
    for (const step of timeline) {
      const wait = step.at - (performance.now() - started);
      if (wait > 0) await sleep(wait);
      await step.act().catch((error: unknown) => options.log(`action failed: ${(error as Error).message}`));
    }

    // Settle: faults stop; queues resume; an operator resolves parked intents, prunes and retries once.
    for (const c of compositions)
      if (c.queue !== undefined) await client.resumeQueue(c.queue.definition.name, NOTE).catch(() => false);
    const settle = (): Promise<void> =>
      waitFinal(store, fleet!, options.workers, options.settleMs, 240_000, () =>
        resolveParked(client, store, desk, counts),
      );
    await settle();
    if (random.next() < 0.7) await prune();
    for (const log of logs.values()) {
      if (random.next() < 0.5 && (await retryIfStopped(client, store, log.composition, log.tag, log)))
        count(counts.actions, 'retry');
    }
    await settle();
    stopSampling = true;
    await sampling.catch(() => undefined);

    await fleet.stop(5_000);
    await closeLocal();
    violations.push(
      ...(await checkBatch({
        db: store.db,
        desk,
        compositions,
        logs,
        snapshots,
        concurrency: options.concurrency,
        counts,
      })),
    );
    return { counts, violations };
  } finally {
    await closeLocal();
    await fleet?.killAll().catch(() => undefined);
    await server?.close().catch(() => undefined);
    await store.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function runIdOf(store: TestStore, composition: Composition, tag: string): Promise<string | undefined> {
  const row = await store.db
    .selectFrom('ledgerflow.workflow_run')
    .select('id')
    .where('workflow_name', '=', composition.root.name)
    .where(sql<string>`input->>'tag'`, '=', tag)
    .executeTakeFirst();
  return row?.id;
}

async function retryIfStopped(
  client: Client,
  store: TestStore,
  composition: Composition,
  tag: string,
  log: RunLog,
): Promise<boolean> {
  const id = await runIdOf(store, composition, tag);
  if (id === undefined) return false;
  const run = await store.db
    .selectFrom('ledgerflow.workflow_run')
    .select('status')
    .where('id', '=', id)
    .executeTakeFirst();
  if (run === undefined || !['failed', 'cancelled', 'compensation_failed'].includes(run.status)) return false;
  try {
    await client.retryRun(id, NOTE);
    log.retried += 1;
    log.cancelled = false;
    log.cancelledWithCompensate = false;
    return true;
  } catch {
    return false; // refused (e.g. a child compensated): the run stays as it is
  }
}

/** An operator settles every parked intent with what the provider says (the desk's truth). */
async function resolveParked(client: Client, store: TestStore, desk: FuzzDesk, counts: BatchCounts): Promise<number> {
  const { rows } = await sql<{ run_id: string; step_name: string; idempotency_key: string }>`
    SELECT e.workflow_id AS run_id, e.step_name, e.idempotency_key FROM ledgerflow.step_effect e
      JOIN ledgerflow.workflow_run r ON r.id = e.workflow_id
     WHERE r.status = 'needs_reconciliation' AND e.status = 'intent'`.execute(store.db);
  let resolved = 0;
  for (const row of rows) {
    const answer = desk.find(row.idempotency_key);
    try {
      await client.resolveEffect(
        row.run_id,
        row.step_name,
        answer === null ? { notFound: true } : { found: answer },
        NOTE,
      );
      resolved += 1;
      counts.actions[answer === null ? 'resolve-not-found' : 'resolve-found'] =
        (counts.actions[answer === null ? 'resolve-not-found' : 'resolve-found'] ?? 0) + 1;
    } catch {
      // Refused (e.g. an oversized answer under max_output_bytes): the run stays parked, and the check says so.
    }
  }
  return resolved;
}

async function terminateBackend(store: TestStore, random: SeededRandom): Promise<number> {
  const { rows } = await sql<{ pid: number }>`
    SELECT pid FROM pg_stat_activity WHERE application_name LIKE ${`${CHAOS_APPLICATION_PREFIX}%`} AND datname = current_database() ORDER BY pid`.execute(
    store.db,
  );
  const target = random.pick(rows);
  if (target === undefined) return 0;
  const { rows: done } = await sql<{ ok: boolean }>`SELECT pg_terminate_backend(${target.pid}) AS ok`.execute(store.db);
  return done[0]?.ok ? 1 : 0;
}

/**
 * Waits until every run of the batch is final, resolving parked runs on the way. Gives up when
 * nothing moved (no run changed status or recorded a step, none is due later) for `stallMs` while
 * the fleet was up, or after `capMs`: on a loaded machine workers boot and work slowly, and only a run that stopped
 * moving is waiting forever.
 */
async function waitFinal(
  store: TestStore,
  fleet: WorkerFleet,
  workers: number,
  stallMs: number,
  capMs: number,
  each: () => Promise<unknown>,
): Promise<void> {
  const started = performance.now();
  let signature = '';
  let movedAt = performance.now();
  while (performance.now() - started < capMs) {
    await each().catch(() => undefined);
    const { rows } = await sql<{ unfinished: number; scheduled: number; moves: string }>`
      SELECT count(*) FILTER (WHERE status <> ALL(${[...FINAL_RUN_STATUSES]}::text[]))::int AS unfinished,
             count(*) FILTER (WHERE status IN ('pending', 'waiting') AND run_after > statement_timestamp() AND isfinite(run_after))::int AS scheduled,
             (SELECT count(*) FROM ledgerflow.step_result)::text || ':' || (SELECT count(*) FROM ledgerflow.step_attempt)::text || ':' ||
             string_agg(status, ',' ORDER BY id) AS moves
        FROM ledgerflow.workflow_run`.execute(store.db);
    const row = rows[0]!;
    if (row.unfinished === 0) return;
    // A run due later (a backoff, a sleep, a timeout) will move: not a stall.
    if (row.moves !== signature || fleet.readyCount < workers || row.scheduled > 0) {
      signature = row.moves;
      movedAt = performance.now();
    } else if (performance.now() - movedAt > stallMs) {
      return;
    }
    await sleep(250);
  }
}
