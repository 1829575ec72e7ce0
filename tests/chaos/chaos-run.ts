import { performance } from 'node:perf_hooks';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { HttpEmailGateway, HttpPaymentGateway, startFakeServer } from '../../examples/fakes/fake-server.js';
import {
  FakePaymentProvider,
  type Charge,
  type ChargeOptions,
  type ChargeRequest,
} from '../../examples/fakes/payment-provider.js';
import { createClient } from '../../runtime/client/client.js';
import type { LedgerflowDatabase } from '../../runtime/store/tables.js';
import { createWorker } from '../../runtime/worker/worker.js';
import { pruneRuns } from '../../runtime/retention/prune.js';
import type { FaultSpec } from '../../runtime/faults/fault-points.js';
import { createPgStore, type PoolerOptions } from '../../runtime/store/pg/pg-store.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { startPostgres } from '../support/postgres-server.js';
import { startPgBouncer, type PgBouncer } from '../support/pgbouncer.js';
import {
  APP_SCHEMA_SQL,
  chaosHandlers,
  chaosLocalOrder,
  chaosLocalPlain,
  chaosOrder,
  chaosPlainHandlers,
  chaosPlainOutput,
  RECEIPT_CLIENT_TIMEOUT_MS,
  startLocalRun,
  RECEIPT_PERFORM_TIMEOUT_MS,
  type ChaosOrderInput,
} from './fixtures/chaos-workflow.js';
import {
  chaosFulfil,
  chaosPick,
  chaosShipped,
  FULFIL_SCHEMA_SQL,
  PICKING_CONCURRENCY,
  pickingQueue,
  type ChaosFulfilInput,
} from './fixtures/chaos-fulfil-workflow.js';
import {
  checkFulfilInvariants,
  checkInvariants,
  LOCAL_ACKED_LINE,
  LOCAL_FAILED_LINE,
  type FulfilReport,
  type InvariantReport,
} from './invariants.js';
import { chaosRefundInputs, checkCompensationInvariants, type CompensationReport } from './compensation-invariants.js';
import { chaosRefund } from './fixtures/chaos-refund-workflow.js';
import { FakeRefundDesk, refundDeskRoutes } from '../support/refund-desk.js';
import { seededRandom } from './seeded-random.js';
import { CHAOS_APPLICATION_PREFIX, WorkerFleet, type FleetCounters } from './worker-fleet.js';

export interface ChaosOptions {
  readonly seed: number;
  readonly runs: number;
  readonly workers: number;
  /** Runs each worker drives at once. */
  readonly concurrency: number;
  /** How long workers are killed, backends terminated and faults fire (up to five times as long while kills or terminations are short of their targets). */
  readonly chaosMs: number;
  readonly serverRestarts: number;
  /**
   * Workers the controller SIGKILLs at random moments during `chaosMs`, paced evenly (the
   * fault points kill more); the outcome counts those that found a live worker to kill.
   */
  readonly kills: number;
  /** Worker backends the controller ends with `pg_terminate_backend`, paced evenly. */
  readonly backendTerminations: number;
  /** The controller's pause between two ticks (starts, events, kills, terminations), drawn uniformly. */
  readonly tickMs: { readonly min: number; readonly max: number };
  /** After the chaos, how long fault-free workers get to finish everything. */
  readonly settleTimeoutMs: number;
  /**
   * Runs each chaos worker process starts for itself with `startAndWait`, one at a time (their
   * inserts ride on their first commits; fixtures/chaos-worker.ts). Default 3.
   */
  readonly localStartsPerWorker?: number;
  /**
   * Everything — the workers, the controller's client and its own worker — reaches the server
   * through a PgBouncer in transaction pooling mode with `poolSize` server connections (the
   * `pgbouncer` project; tests/support/pgbouncer.ts), stores opened with `pooler`. Workers of
   * even spawn index LISTEN over the server's own URL, the others (and the controller) have no
   * URL to listen on and poll. The invariants are read over the server's own URL.
   */
  readonly pgbouncer?: { readonly poolSize: number };
  readonly log: (line: string) => void;
}

export interface ChaosOutcome {
  readonly options: ChaosOptions;
  readonly report: InvariantReport;
  readonly fulfil: FulfilReport;
  /** The compensating `chaos-refund` runs (issue 17). */
  readonly compensation: CompensationReport;
  /** Events the controller sent, resends with the same dedupe key included. */
  readonly eventsSent: number;
  /** Runs the workers started for themselves (`chaos-local-order`) whose `startAndWait` returned them completed (each checked present and completed). */
  readonly localAcked: number;
  /** Runs of `chaos-local-order` in the database at the end (a start killed before its first commit leaves none). */
  readonly localRuns: number;
  /** The most `chaos-picking` slots held at once, sampled from the database during the run. */
  readonly maxPickingSlots: number;
  readonly fleet: FleetCounters;
  /** Worker SIGKILLs, by whom: `total` is their sum. */
  readonly kills: {
    readonly total: number;
    readonly atRandom: number;
    readonly atFaultPoint: number;
    readonly self: number;
  };
  readonly unexpectedExits: readonly string[];
  readonly backendTerminations: number;
  readonly serverRestarts: number;
  readonly seconds: number;
  /** With `pgbouncer`: the transactions PgBouncer counted on the chaos database (SHOW STATS). */
  readonly pooledTransactions?: number;
  /** The one-line summary the suite prints. */
  readonly summary: string;
}

const LEASE_MS = 1_500;
/** Kills (and, apart, backend terminations) the controller tries per tick at most, catching up with its pace. */
const PACING_TRIES_PER_TICK = 3;
const PROVIDER_LATENCY_MS = 60;
/**
 * Late applications at the email provider: this share of receipt requests is applied (and
 * answered) only after a delay drawn from SLOW_APPLY_MS — longer than the receipt handler's
 * client timeout (RECEIPT_CLIENT_TIMEOUT_MS, 250 ms), so its client gives up with a
 * TimeoutError on a message that is delivered anyway, 150–700 ms later. The delay stays below
 * the receipt step's performTimeoutMs (1 000 ms), hence well inside the reconcile horizon
 * (intent time + performTimeoutMs + lease = 2.5 s, and a perform starts within one lease of its
 * intent): the provider finishing within it is the stated assumption the guarantee rests on.
 */
const SLOW_APPLY_SHARE = 0.3;
const SLOW_APPLY_MS = { min: 400, max: 950 } as const;
if (!(SLOW_APPLY_MS.min > RECEIPT_CLIENT_TIMEOUT_MS && SLOW_APPLY_MS.max < RECEIPT_PERFORM_TIMEOUT_MS)) {
  throw new RangeError(
    'chaos: slow applications must outlast the receipt client timeout and stay under its performTimeoutMs',
  );
}

/** The chaos run's payment provider, which can tell the controller when a key's first charge request arrives. */
class ChargeWatchingProvider extends FakePaymentProvider {
  readonly #watchers = new Map<string, () => void>();

  /** Calls `then` (once) when the provider first receives a charge under `idempotencyKey`. */
  onFirstCharge(idempotencyKey: string, then: () => void): void {
    this.#watchers.set(idempotencyKey, then);
  }

  override charge(request: ChargeRequest, options: ChargeOptions = {}): Promise<Charge> {
    const watcher = options.idempotencyKey === undefined ? undefined : this.#watchers.get(options.idempotencyKey);
    if (watcher !== undefined) {
      this.#watchers.delete(options.idempotencyKey!);
      watcher();
    }
    return super.charge(request, options);
  }
}

/**
 * Fault points armed in chaos workers. `kill` is rarer than `throw` and `hang` because each
 * kill costs a process start; `hang` outlasts the lease, making the worker a zombie whose
 * commit must be fenced out.
 */
function faultSpec(seed: number): FaultSpec {
  const point = (probability: number) => ({
    probability,
    actions: ['throw', 'throw', 'hang', 'kill'] as const,
    hangMs: LEASE_MS + 1_000,
  });
  return {
    seed,
    points: {
      'after-claim': point(0.02),
      'inside-transactional-handler': point(0.04),
      'opening-step-transaction': point(0.03),
      'before-step-commit': point(0.03),
      'after-intent-commit': point(0.04),
      'after-perform': point(0.05),
      'before-wait-commit': point(0.04),
      'after-child-batch': point(0.05),
      'after-queue-slot': point(0.03),
      'before-result-commit': point(0.04),
      'before-lease-renewal': point(0.01),
    },
  };
}

/**
 * One chaos run on a PostgreSQL server of its own (it is restarted, so it cannot be shared):
 * several hundred `chaos-order` runs driven by worker child processes that are SIGKILLed at
 * random and at fault points, their backends terminated, the server crashed and restarted;
 * then fault-free workers finish, and the invariants are checked from the providers' counters
 * and the database.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosOutcome> {
  const started = performance.now();
  const random = seededRandom(options.seed);
  const server = await startPostgres();
  const payments = new ChargeWatchingProvider({ latencyMs: PROVIDER_LATENCY_MS });
  // Its own stream, so that the controller's decisions replay from the seed whatever the
  // (timing-dependent) order in which receipt requests arrive.
  const applyRandom = seededRandom((options.seed ^ 0x5eed_a991) >>> 0);
  const email = new FakeEmailProvider({
    latencyMs: PROVIDER_LATENCY_MS,
    applyDelayMs: () =>
      applyRandom.next() < SLOW_APPLY_SHARE
        ? applyRandom.int(SLOW_APPLY_MS.min, SLOW_APPLY_MS.max) - PROVIDER_LATENCY_MS
        : 0,
  });
  const refunds = new FakeRefundDesk();
  const fakes = await startFakeServer({ payments, email }, [refundDeskRoutes(refunds)]);
  const databaseUrl = server.urlFor('chaos');
  let bouncer: PgBouncer | undefined;
  if (options.pgbouncer !== undefined) {
    try {
      bouncer = await startPgBouncer({ server: server.url, poolSize: options.pgbouncer.poolSize });
    } catch (error) {
      await server.destroy();
      throw error;
    }
  }
  // What the stores connect to: PgBouncer's URL of the chaos database, or the server's own.
  const storeUrl = bouncer?.urlFor('chaos') ?? databaseUrl;
  const pooler = (listen: boolean): { pooler?: PoolerOptions } =>
    bouncer === undefined ? {} : { pooler: { mode: 'transaction', ...(listen ? { listenUrl: databaseUrl } : {}) } };
  const poolerEnv = (spawnIndex: number): Record<string, string> =>
    bouncer === undefined
      ? {}
      : { LEDGERFLOW_POOLER: 'transaction', ...(spawnIndex % 2 === 0 ? { LEDGERFLOW_LISTEN_URL: databaseUrl } : {}) };
  const admin = async <T>(use: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: server.url });
    client.on('error', () => {});
    await client.connect();
    try {
      return await use(client);
    } finally {
      await client.end().catch(() => {});
    }
  };
  await admin((c) => c.query('CREATE DATABASE chaos'));
  const store = createPgStore({
    connectionString: storeUrl,
    applicationName: 'chaos-controller',
    maxConnections: 4,
    ...pooler(false),
  });
  // Runs the workers started for themselves and reported completed: order id → run id.
  const localAcked = new Map<string, string>();
  let localFailed = 0;
  const fleet = new WorkerFleet({
    size: options.workers,
    random,
    log: options.log,
    onLine: (line) => {
      const [marker, orderId, runId] = line.split(' ');
      if (marker === LOCAL_ACKED_LINE && orderId !== undefined && runId !== undefined) localAcked.set(orderId, runId);
      if (marker === LOCAL_FAILED_LINE) localFailed += 1;
    },
    // A worker parked at a fault point is killed right there: the first time always (the run
    // must show a kill at a fault point, and a run has only a handful of hangs), then half of the time.
    killAtFault: () =>
      fleet.counters.killedByControllerAtFaultPoint + fleet.counters.killedAtFaultPoint === 0 || random.next() < 0.5,
    env: (spawnIndex) => ({
      ...poolerEnv(spawnIndex),
      DATABASE_URL: storeUrl,
      CHAOS_FAKES_URL: fakes.url,
      CHAOS_LEASE_MS: String(LEASE_MS),
      CHAOS_CONCURRENCY: String(options.concurrency),
      CHAOS_LOCAL_STARTS: String(options.localStartsPerWorker ?? 3),
      CHAOS_LOCAL_SEED: String(options.seed * 1_000 + spawnIndex),
      LEDGERFLOW_FAULTS: JSON.stringify(faultSpec(options.seed * 1_000 + spawnIndex)),
    }),
  });
  let backendTerminations = 0;
  let serverRestarts = 0;
  try {
    await migrateForTest(store, [chaosOrder, chaosLocalOrder, chaosLocalPlain, chaosPick, chaosFulfil, chaosRefund]);
    await sql.raw(APP_SCHEMA_SQL).execute(store.db);
    await sql.raw(FULFIL_SCHEMA_SQL).execute(store.db);
    const client = createClient({ store });
    const fulfilments: ChaosFulfilInput[] = Array.from(
      { length: Math.max(1, Math.floor(options.runs / 4)) },
      (_, i) => ({
        orderId: `fulfil-${options.seed}-${i}`,
        lines: random.int(1, 6),
        express: random.next() < 0.5,
        napMs: random.int(100, 1_500),
      }),
    );
    // Each order's shipping event is sent at a random moment — before its run reaches the wait
    // or after — and a third of them twice (same dedupe key: stored once).
    const eventsToSend = fulfilments.flatMap((f) => (random.next() < 0.33 ? [f.orderId, f.orderId] : [f.orderId]));
    for (let i = eventsToSend.length - 1; i > 0; i--) {
      const j = random.int(0, i);
      [eventsToSend[i], eventsToSend[j]] = [eventsToSend[j]!, eventsToSend[i]!];
    }
    let eventsSent = 0;
    const retrying = async (what: () => Promise<unknown>): Promise<void> => {
      for (let attempt = 1; ; attempt++) {
        try {
          await what();
          return;
        } catch (error) {
          if (attempt >= 100) throw error;
          await sleep(200);
        }
      }
    };
    const sendShipped = (orderId: string): Promise<void> =>
      retrying(() =>
        client.sendEvent(
          chaosShipped,
          orderId,
          { orderId, carrier: 'chaos-post' },
          { dedupeKey: `shipped:${orderId}` },
        ),
      ).then(() => {
        eventsSent += 1;
      });
    const startFulfil = (input: ChaosFulfilInput): Promise<void> =>
      retrying(() => client.start(chaosFulfil, input, { dedupeKey: input.orderId }));
    const inputs: ChaosOrderInput[] = Array.from({ length: options.runs }, (_, i) => ({
      orderId: `order-${options.seed}-${i}`,
      customerId: `customer-${i % 17}`,
      email: `buyer${i}@example.com`,
      quantity: 1 + (i % 5),
    }));
    // Starting is idempotent by dedupe key, so a start that met a restarting server is simply repeated.
    const startRun = async (input: ChaosOrderInput): Promise<void> => {
      for (let attempt = 1; ; attempt++) {
        try {
          await client.start(chaosOrder, input, { dedupeKey: input.orderId });
          return;
        } catch (error) {
          if (attempt >= 100) throw error;
          await sleep(200);
        }
      }
    };
    const upfront = Math.floor(options.runs * 0.4);
    for (const input of inputs.slice(0, upfront)) await startRun(input);
    const refundOrders = chaosRefundInputs(options.seed, Math.max(1, Math.floor(options.runs / 8)));
    const refundRunIds = new Map<string, string>();
    for (const input of refundOrders) {
      await retrying(async () =>
        refundRunIds.set(input.orderId, (await client.start(chaosRefund, input, { dedupeKey: input.orderId })).runId),
      );
    }
    // `cancel` orders are cancelled with compensate: half the moment the provider receives their
    // charge (its answer still on the way: the compensation meets an open intent it can settle only
    // by sending the key again), half at a random time in the first seconds of the chaos.
    const cancels: Array<Promise<void>> = [];
    const cancelOrder = (orderId: string): void => {
      cancels.push(
        retrying(() =>
          client.cancel(refundRunIds.get(orderId)!, {
            compensate: true,
            actor: 'chaos',
            reason: 'the customer cancelled',
          }),
        ),
      );
    };
    for (const input of refundOrders.filter((o) => o.outcome === 'cancel')) {
      if (random.next() < 0.5) payments.onFirstCharge(`charge:${input.orderId}`, () => cancelOrder(input.orderId));
      else setTimeout(() => cancelOrder(input.orderId), random.int(0, 3_000));
    }
    const later = inputs.slice(upfront);
    const fulfilUpfront = Math.floor(fulfilments.length / 2);
    for (const input of fulfilments.slice(0, fulfilUpfront)) await startFulfil(input);
    const fulfilLater = fulfilments.slice(fulfilUpfront);
    for (const orderId of eventsToSend.splice(0, Math.floor(eventsToSend.length / 4))) await sendShipped(orderId);

    let maxPickingSlots = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        try {
          const { rows } = await sql<{ n: number }>`
            SELECT count(*)::int AS n FROM ledgerflow.queue_slot WHERE queue = ${pickingQueue.name}`.execute(store.db);
          maxPickingSlots = Math.max(maxPickingSlots, rows[0]?.n ?? 0);
        } catch {
          // The server restarts once; the pool reconnects.
        }
        await sleep(20);
      }
    })();
    // Consumed events are pruned as soon as they are consumed, throughout (runs are not: they are
    // checked afterwards). A resend of a pruned event must find its tombstone and store nothing.
    const pruner = (async () => {
      while (sampling) {
        try {
          await pruneRuns(store.db, { olderThanMs: 365 * 86_400_000, eventsOlderThanMs: 0, batchSize: 50 });
        } catch {
          // The server restarts once; the pool reconnects.
        }
        await sleep(250);
      }
    })();
    fleet.start();
    const chaosStart = performance.now();
    // The controller's own worker and client (not killed: its starts live to be acknowledged, through
    // the backend terminations and the server crash): runs of chaos-local-order with startAndWait,
    // each insert riding on its run's first commit (client/deferred-start.ts).
    const localStarts = startLocally(storeUrl, pooler(false), fakes.url, localAcked, () => (localFailed += 1));
    const restartAt = Array.from(
      { length: options.serverRestarts },
      (_, i) => ((i + 0.3 + random.next() * 0.4) / options.serverRestarts) * options.chaosMs,
    );
    const ticks = options.chaosMs / ((options.tickMs.min + options.tickMs.max) / 2);
    const perTick = Math.max(1, Math.ceil(later.length / ticks));
    const fulfilPerTick = Math.max(1, Math.ceil(fulfilLater.length / ticks));
    const eventsPerTick = Math.max(1, Math.ceil(eventsToSend.length / ticks));
    // Kills and terminations are paced to their targets: by any moment, the share of the target
    // that the elapsed share of chaosMs calls for (which worker, which backend: seeded). Only
    // hits count: a try that finds no live worker or no backend (all restarting, the server
    // down) is made again at the next tick, at most PACING_TRIES_PER_TICK of each per tick.
    let randomKills = 0;
    const due = (target: number, elapsed: number): number =>
      Math.ceil((target * Math.min(elapsed, options.chaosMs)) / options.chaosMs);
    // Past chaosMs the chaos goes on while the kills or terminations are short of their targets
    // (a loaded machine starts workers slowly, and only started workers are killed: beside the
    // fuzzer on two cores a replaced worker can take 20 s to be ready again), for at most four
    // times as long again.
    const chaosGoesOn = (): boolean => {
      const elapsed = performance.now() - chaosStart;
      if (elapsed < options.chaosMs) return true;
      return (
        elapsed < 5 * options.chaosMs &&
        (randomKills < options.kills || backendTerminations < options.backendTerminations)
      );
    };
    while (chaosGoesOn()) {
      await sleep(random.int(options.tickMs.min, options.tickMs.max));
      const elapsed = performance.now() - chaosStart;
      await Promise.all([
        ...later.splice(0, perTick).map(startRun),
        ...fulfilLater.splice(0, fulfilPerTick).map(startFulfil),
        ...eventsToSend.splice(0, eventsPerTick).map(sendShipped),
      ]);
      if (restartAt.length > 0 && elapsed >= restartAt[0]!) {
        restartAt.shift();
        options.log(`restarting PostgreSQL (immediate) at ${(elapsed / 1000).toFixed(1)} s`);
        await server.restart('immediate');
        serverRestarts += 1;
        continue;
      }
      for (let tries = 0; tries < PACING_TRIES_PER_TICK && randomKills < due(options.kills, elapsed); tries++) {
        if (fleet.killRandom()) randomKills += 1;
      }
      for (
        let tries = 0;
        tries < PACING_TRIES_PER_TICK && backendTerminations < due(options.backendTerminations, elapsed);
        tries++
      ) {
        backendTerminations += await terminateRandomBackend(admin, random.next()).catch(() => 0);
      }
    }
    for (const input of later) await startRun(input);
    for (const input of fulfilLater) await startFulfil(input);
    for (const orderId of eventsToSend) await sendShipped(orderId);

    // Calm: every worker is replaced by a fault-free one, which must finish everything.
    options.log(`chaos over after ${((performance.now() - chaosStart) / 1000).toFixed(1)} s; settling`);
    await localStarts.stop();
    await fleet.killAll();
    fleet.start((spawnIndex) => ({
      ...poolerEnv(spawnIndex),
      DATABASE_URL: storeUrl,
      CHAOS_FAKES_URL: fakes.url,
      CHAOS_LEASE_MS: String(LEASE_MS),
      CHAOS_CONCURRENCY: String(options.concurrency),
      CHAOS_SPAWN: String(spawnIndex),
    }));
    await Promise.all(cancels);
    await waitUntilSettled(store.db, options.settleTimeoutMs);
    await fleet.stop();
    sampling = false;
    await sampler;
    await pruner;

    const report = await checkInvariants(databaseUrl, chaosOrder.name, { payments, email });
    // The runs the workers started for themselves: every one in the database completed, with one
    // write (effects are checked with everything else above: the providers' counters are global),
    // and every start acknowledged completed is there, completed, under the id it returned.
    const local = await checkInvariants(databaseUrl, chaosLocalOrder.name, { payments, email });
    const localRows = await store.db
      .selectFrom('ledgerflow.workflow_run')
      .select(['id', 'status', sql<string>`input->>'orderId'`.as('order_id')])
      .where('workflow_name', 'in', [chaosLocalOrder.name, chaosLocalPlain.name])
      .execute();
    const localByOrder = new Map(localRows.map((row) => [row.order_id, row]));
    const localViolations = local.violations.filter((v) => !report.violations.includes(v));
    for (const [orderId, runId] of localAcked) {
      const row = localByOrder.get(orderId);
      if (row === undefined)
        localViolations.push(
          `local start ${orderId} returned run ${runId} completed, but no run of it is in the database`,
        );
      else if (row.id !== runId || row.status !== 'completed')
        localViolations.push(
          `local start ${orderId} returned run ${runId} completed; the database has run ${row.id} ${row.status}`,
        );
    }
    if (localRows.length !== localByOrder.size)
      localViolations.push(`${localRows.length - localByOrder.size} local order(s) have more than one run`);
    const plain = await checkPlainRuns(store.db);
    localViolations.push(...plain.violations);
    const fulfil = await checkFulfilInvariants(databaseUrl, fulfilments);
    const compensation = await checkCompensationInvariants(databaseUrl, refundOrders, { payments, refunds });
    const pooledTransactions = bouncer === undefined ? undefined : await transactionsThrough(bouncer, 'chaos');
    const seconds = (performance.now() - started) / 1000;
    const c = fleet.counters;
    const kills = {
      total: c.killedByController + c.killedByControllerAtFaultPoint + c.killedAtFaultPoint,
      atRandom: c.killedByController,
      atFaultPoint: c.killedByControllerAtFaultPoint,
      self: c.killedAtFaultPoint,
    };
    const summary =
      `chaos seed=${options.seed}: runs=${report.runs} completed=${report.completed} ` +
      `kills=${kills.total} ` +
      `(at random ${kills.atRandom}, by the controller at fault points ${kills.atFaultPoint}, ` +
      `self at fault points ${kills.self}) ` +
      `faults thrown=${c.faultsFired.throw} hung=${c.faultsFired.hang} ` +
      `backend-terminations=${backendTerminations} server-restarts=${serverRestarts} ` +
      `charges=${payments.totalCharges()} emails=${email.totalSent()} ` +
      `late-applied=${report.lateApplied} client-timeouts=${report.clientTimeouts} ` +
      `fulfil-runs=${fulfil.runs} fulfil-completed=${fulfil.completed} children=${fulfil.children} skipped=${fulfil.skipped} ` +
      `max-picking-slots=${maxPickingSlots}/${PICKING_CONCURRENCY} ` +
      `refund-runs=${compensation.runs} compensated=${compensation.compensated} compensation-failed=${compensation.compensationFailed} refunds=${compensation.refunds} ` +
      `cancelled=${compensation.cancelled} charges-taken-over=${compensation.takenOver} ` +
      `local-runs=${localRows.length} (plain ${plain.runs}) local-acked=${localAcked.size} local-failed=${localFailed} ` +
      `events-sent=${eventsSent} events-stored=${fulfil.events} events-taken=${fulfil.consumed} events-pruned=${fulfil.pruned} ` +
      `unexpected-exits=${c.unexpectedExits} duplicates found=${report.duplicates + fulfil.duplicates + compensation.duplicates} ` +
      `violations=${report.violations.length + fulfil.violations.length + compensation.violations.length} ` +
      (pooledTransactions === undefined ? '' : `through-pgbouncer transactions=${pooledTransactions} `) +
      `in ${seconds.toFixed(0)} s`;
    return {
      options,
      report: { ...report, violations: [...report.violations, ...localViolations] },
      localAcked: localAcked.size,
      localRuns: localRows.length,
      fulfil,
      compensation,
      eventsSent,
      maxPickingSlots,
      fleet: c,
      kills,
      unexpectedExits: fleet.unexpected,
      backendTerminations,
      serverRestarts,
      seconds,
      ...(pooledTransactions !== undefined ? { pooledTransactions } : {}),
      summary,
    };
  } finally {
    await fleet.stop(2_000).catch(() => {});
    await store.close().catch(() => {});
    await fakes.close().catch(() => {});
    await bouncer?.stop().catch(() => {});
    await server.destroy();
  }
}

/** Transactions PgBouncer has passed on for `database` since it started (its admin console's SHOW STATS). */
async function transactionsThrough(bouncer: PgBouncer, database: string): Promise<number> {
  const client = new pg.Client({ connectionString: bouncer.urlFor('pgbouncer') });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ database: string; total_xact_count: string }>('SHOW STATS');
    return Number(rows.find((row) => row.database === database)?.total_xact_count ?? 0);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Every `chaos-local-plain` run in the database (each inserted completed by its start's one
 * statement, or inserted by its start after a worker gave it back and completed by a claim):
 * completed, with the output its input gives, one result per step and a succeeded attempt each.
 */
async function checkPlainRuns(
  db: Kysely<LedgerflowDatabase>,
): Promise<{ readonly runs: number; readonly violations: string[] }> {
  const { rows } = await sql<{ id: string; status: string; quantity: number; output: unknown; steps: string[] | null }>`
    SELECT r.id, r.status, (r.input->>'quantity')::int AS quantity, r.output,
           (SELECT array_agg(s.step_name ORDER BY s.created_at) FROM ledgerflow.step_result s WHERE s.run_id = r.id) AS steps
      FROM ledgerflow.workflow_run r
     WHERE r.workflow_name = ${chaosLocalPlain.name}`.execute(db);
  const violations: string[] = [];
  for (const run of rows) {
    if (run.status !== 'completed') violations.push(`local plain run ${run.id} is ${run.status}, not completed`);
    else if (JSON.stringify(run.output) !== JSON.stringify(chaosPlainOutput(run.quantity)))
      violations.push(`local plain run ${run.id} completed with ${JSON.stringify(run.output)}`);
    if (JSON.stringify(run.steps) !== JSON.stringify(['price', 'total']))
      violations.push(`local plain run ${run.id} has results ${JSON.stringify(run.steps)}, not price then total`);
  }
  const { rows: unsucceeded } = await sql<{ id: string; step_name: string }>`
    SELECT r.id, steps.step_name FROM ledgerflow.workflow_run r
     CROSS JOIN (VALUES ('price'), ('total')) AS steps(step_name)
     WHERE r.workflow_name = ${chaosLocalPlain.name} AND r.status = 'completed'
       AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_attempt a
                        WHERE a.run_id = r.id AND a.step_name = steps.step_name AND a.status = 'succeeded')`.execute(
    db,
  );
  for (const row of unsucceeded) violations.push(`local plain run ${row.id}: no succeeded attempt of ${row.step_name}`);
  return { runs: rows.length, violations };
}

/**
 * Starts `chaos-local-order` and `chaos-local-plain` runs one at a time, with `startAndWait` through a client created with
 * a worker of its own (a pool of its own, named like the chaos workers' so that its backends are
 * terminated too), until `stop()`; each run it returned completed is put in `acked`, and each
 * start that threw (the server restarting, its backend terminated: not acknowledged) counted.
 */
function startLocally(
  databaseUrl: string,
  pooler: { pooler?: PoolerOptions },
  fakesUrl: string,
  acked: Map<string, string>,
  failed: () => void,
): { stop(): Promise<void> } {
  const store = createPgStore({
    connectionString: databaseUrl,
    applicationName: `${CHAOS_APPLICATION_PREFIX}controller-local`,
    maxConnections: 4,
    ...pooler,
  });
  const worker = createWorker({
    store,
    workflows: [
      chaosHandlers(
        { payments: new HttpPaymentGateway(fakesUrl), email: new HttpEmailGateway(fakesUrl) },
        {},
        chaosLocalOrder,
      ),
      chaosPlainHandlers(),
    ],
    workerId: 'chaos-controller-local',
    concurrency: 2,
    leaseMs: LEASE_MS,
    pollIntervalMs: 100,
    reconcileIntervalMs: 500,
  });
  const client = createClient({ store, worker });
  let stopping = false;
  const loop = (async () => {
    await worker.start();
    for (let i = 0; !stopping; i++) {
      const orderId = `local-controller-${i}`;
      try {
        const run = await startLocalRun(client, orderId, i, 30_000);
        if (run.status === 'completed') acked.set(orderId, run.id);
      } catch {
        failed();
        await sleep(200);
      }
    }
  })();
  return {
    async stop() {
      stopping = true;
      await loop.catch(() => {});
      await worker.stop({ timeoutMs: 2_000 }).catch(() => {});
      await store.close().catch(() => {});
    },
  };
}

/** Terminates one backend of a chaos worker; `pick` in [0, 1) chooses which (seeded). */
async function terminateRandomBackend(
  admin: <T>(use: (client: pg.Client) => Promise<T>) => Promise<T>,
  pick: number,
): Promise<number> {
  return admin(async (client) => {
    const { rows } = await client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = 'chaos' AND application_name LIKE $1 ORDER BY pid`,
      [`${CHAOS_APPLICATION_PREFIX}%`],
    );
    const target = rows[Math.floor(pick * rows.length)];
    if (target === undefined) return 0;
    const { rows: done } = await client.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [target.pid]);
    return done[0]?.ok ? 1 : 0;
  });
}

async function waitUntilSettled(db: ReturnType<typeof createPgStore>['db'], timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    try {
      const row = await db
        .selectFrom('ledgerflow.workflow_run')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', 'in', ['pending', 'running', 'waiting', 'needs_reconciliation'])
        .executeTakeFirstOrThrow();
      if (Number(row.n) === 0) return;
    } catch {
      // The pool reconnects after the server restart.
    }
    await sleep(250);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
