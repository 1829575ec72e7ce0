import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import pg from 'pg';
import {
  FakeEmailProvider,
  type EmailMessage,
  type SendOptions,
  type SentEmail,
} from '../../examples/fakes/email-provider.js';
import { startFakeServer } from '../../examples/fakes/fake-server.js';
import {
  FakePaymentProvider,
  type Charge,
  type ChargeOptions,
  type ChargeRequest,
} from '../../examples/fakes/payment-provider.js';
import { createClient, type Client } from '../../runtime/client/client.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import type { Store } from '../../runtime/store/store.js';
import { APP_SCHEMA_SQL, chaosOrder, type ChaosOrderInput } from '../chaos/fixtures/chaos-workflow.js';
import { checkInvariants, type InvariantReport } from '../chaos/invariants.js';
import { seededRandom } from '../chaos/seeded-random.js';
import { WorkerFleet } from '../chaos/worker-fleet.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { startPostgres, type PostgresServer } from '../support/postgres-server.js';
import type { AckLine } from './fixtures/failover-worker.js';
import { startReplicationLink } from './replication-link.js';

const WORKER_ENTRY = fileURLToPath(new URL('./fixtures/failover-worker.ts', import.meta.url));
const STANDBY_NAME = 'standby1';
const LEASE_MS = 1_500;
const PROVIDER_LATENCY_MS = 60;
/** The ledger steps of `chaos-order`: their `step_effect` rows are what a failover must keep. */
const LEDGER_STEPS = new Set(['reserve', 'charge', 'receipt']);
/** Runs a client waits for across the failover. */
const WAITS = 6;

/**
 * A database that fails over under the load. `runFailover` puts the load on it, calls `fail`,
 * reads the standby that is to take over (what it has then is what promotion keeps), calls
 * `promote` and finishes the runs on the new primary.
 */
export interface FailoverTarget {
  /** The multi-host URL of database `failover` (created, empty) that workers and the client use. */
  readonly databaseUrl: string;
  /** Database `failover` on the standby that becomes the new primary, directly. */
  readonly standbyUrl: string;
  /**
   * The failure. Resolves once the primary is gone: `cutAt` when the standby stopped receiving
   * from it, `killAt` when it stopped serving anyone (the same instant for a crash or a network cut).
   */
  fail(): Promise<{ readonly cutAt: number; readonly killAt: number }>;
  /** After the standby was read: promotes it, or waits until a cluster manager has; resolves once it accepts writes. */
  promote(): Promise<void>;
  /** Once the runs settled, the workers still running: what becomes of the old primary, for the summary. */
  aftermath?(): Promise<string>;
  close(): Promise<void>;
}

export interface FailoverOptions {
  /** Names the run in logs, order ids and the summary. */
  readonly label: string;
  readonly setUp: () => Promise<FailoverTarget>;
  readonly seed: number;
  readonly runs: number;
  readonly workers: number;
  readonly concurrency: number;
  /** Load before the failure. */
  readonly loadMs: number;
  /** How long the client's starts are spread over, from the start of the load: past the failure, so some meet it. */
  readonly startsOverMs: number;
  readonly settleTimeoutMs: number;
  readonly log: (line: string) => void;
}

/**
 * What a failover did to what had been acknowledged. "Acknowledged" is counted from the
 * acknowledged side, never from the database: a start is acknowledged when `client.start`
 * returned its run; an intent when the provider received the call its perform makes (a worker
 * calls only after its intent commit returned); a recorded ledger row when the worker's commit
 * of the step returned (its `step-succeeded`, appended to a file at once). A row a reader saw on
 * the primary is NOT acknowledged: PostgreSQL shows a commit to other sessions while the
 * committing one still waits for its synchronous standby.
 */
export interface FailoverOutcome {
  readonly startsAcked: number;
  readonly lostRuns: number;
  readonly intentsAcked: number;
  readonly lostIntents: number;
  readonly recordedAcked: number;
  readonly lostRecorded: number;
  /** Emails sent again for a reference (the email provider does not dedupe). */
  readonly duplicateEmails: number;
  /** Charges applied twice for a key (the payment provider dedupes: should stay 0). */
  readonly duplicateCharges: number;
  /** Charge requests the payment provider answered from its own dedupe (a second call it absorbed). */
  readonly chargeReplays: number;
  /** Lost intents whose effect the email provider then applied a second time. */
  readonly secondCallsAfterLostIntent: number;
  /** Worker commits acknowledged while the standby was cut off (a synchronous standby allows none). */
  readonly acksDuringPartition: number;
  /**
   * How long after the cut the last of those was stamped: a worker stamps an acknowledgement
   * when its commit has returned, so a commit confirmed just before the cut can be stamped just after.
   */
  readonly latestAckWhileCutMs: number;
  /** `waitForRun` calls in progress when the standby was cut off that returned a completed run. */
  readonly waitsCompleted: number;
  /** How each of those waits ended: the run's status, or the error that ended it. */
  readonly waits: readonly string[];
  /** Worker commits acknowledged in the second before the cut: the failover happened under load. */
  readonly acksBeforeCut: number;
  /** Worker processes started beyond the fleet's size: they must follow the failover without a restart. */
  readonly workerRestarts: number;
  readonly unexpectedExits: readonly string[];
  /** Each worker's LISTEN connection came back on the new primary. */
  readonly listenersRestored: number;
  /** From the kill to the first commit acknowledged by the new primary. */
  readonly failoverSeconds: number;
  /** Runs still unfinished when the settle timeout ran out. */
  readonly unsettled: number;
  /**
   * Attempts written after the promotion under a token below the new timeline's floor (core 0023)
   * other than the one the promoted standby held for the run: tokens the old primary may have
   * handed out already, to a worker whose claim the failover lost. Must be 0.
   */
  readonly tokensBelowFloor: number;
  /** What the target said became of the old primary ('' when it says nothing). */
  readonly aftermath: string;
  readonly report: InvariantReport;
  readonly summary: string;
}

/** Providers that remember when each key was first asked for, in this process: a lost ledger cannot hide a call. */
class RecordingPayments extends FakePaymentProvider {
  readonly firstRequestAt = new Map<string, number>();
  override charge(request: ChargeRequest, options: ChargeOptions = {}): Promise<Charge> {
    if (options.idempotencyKey !== undefined && !this.firstRequestAt.has(options.idempotencyKey)) {
      this.firstRequestAt.set(options.idempotencyKey, Date.now());
    }
    return super.charge(request, options);
  }
}

class RecordingEmail extends FakeEmailProvider {
  readonly firstRequestAt = new Map<string, number>();
  override send(message: EmailMessage, options: SendOptions = {}): Promise<SentEmail> {
    if (!this.firstRequestAt.has(message.reference)) this.firstRequestAt.set(message.reference, Date.now());
    return super.send(message, options);
  }
}

/**
 * A primary and its streaming standby that the test itself fails over: the standby is cut off
 * from the primary, the primary serves on for `partitionMs` and is SIGKILLed (with every
 * backend), and — once `runFailover` has read the standby — the standby is promoted by `pg_ctl promote`.
 */
export async function streamingStandby(options: {
  readonly synchronous: boolean;
  readonly partitionMs: number;
}): Promise<FailoverTarget> {
  const primary = await startPostgres({
    settings: options.synchronous
      ? { synchronous_standby_names: STANDBY_NAME, synchronous_commit: 'on' }
      : { synchronous_commit: 'on' },
  });
  const link = await startReplicationLink(primary.port);
  let standby: PostgresServer | undefined;
  const close = async (): Promise<void> => {
    await link.close().catch(() => {});
    await standby?.destroy().catch(() => {});
    await primary.destroy().catch(() => {});
  };
  try {
    standby = await startPostgres({
      standbyOf: { port: primary.port, connectPort: link.port, applicationName: STANDBY_NAME },
    });
    await waitForStandby(primary, options.synchronous ? 'sync' : 'async');
    await query(primary.url, 'CREATE DATABASE failover');
  } catch (error) {
    await close();
    throw error;
  }
  const promoted = standby;
  return {
    databaseUrl: `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${promoted.port}/failover?target_session_attrs=read-write`,
    standbyUrl: promoted.urlFor('failover'),
    async fail() {
      const cutAt = Date.now();
      link.cut();
      await sleep(options.partitionMs);
      const killAt = Date.now();
      await primary.kill();
      return { cutAt, killAt };
    },
    promote: () => promoted.promote(),
    close,
  };
}

/**
 * `chaos-order` load from worker processes and a client on the target's multi-host URL; then the
 * target fails, its standby is read once it has replayed all it received (exactly what promotion
 * keeps) and promoted. Workers and client find the new primary by themselves; the runs are
 * finished there and everything acknowledged before the failure is looked for in what the
 * standby kept.
 */
export async function runFailover(options: FailoverOptions): Promise<FailoverOutcome> {
  const started = performance.now();
  const mode = options.label;
  const target = await options.setUp();
  const payments = new RecordingPayments({ latencyMs: PROVIDER_LATENCY_MS });
  const email = new RecordingEmail({ latencyMs: PROVIDER_LATENCY_MS });
  const fakes = await startFakeServer({ payments, email });
  const ackDir = mkdtempSync(join(tmpdir(), 'ledgerflow-failover-acks-'));
  let store: Store | undefined;
  let fleet: WorkerFleet | undefined;
  try {
    const databaseUrl = target.databaseUrl;
    store = createPgStore({ connectionString: databaseUrl, applicationName: 'failover-controller', maxConnections: 6 });
    await migrateForTest(store, [chaosOrder]);
    await sql.raw(APP_SCHEMA_SQL).execute(store.db);
    const client = createClient({ store });

    fleet = new WorkerFleet({
      size: options.workers,
      random: seededRandom(options.seed),
      log: options.log,
      entry: WORKER_ENTRY,
      env: () => ({
        DATABASE_URL: databaseUrl,
        CHAOS_FAKES_URL: fakes.url,
        CHAOS_LEASE_MS: String(LEASE_MS),
        CHAOS_CONCURRENCY: String(options.concurrency),
        FAILOVER_ACK_DIR: ackDir,
      }),
    });

    const inputs: ChaosOrderInput[] = Array.from({ length: options.runs }, (_, i) => ({
      orderId: `order-${mode}-${i}`,
      customerId: `customer-${i % 11}`,
      email: `buyer${i}@example.com`,
      quantity: 1 + (i % 4),
    }));
    const acknowledgedStarts = new Map<string, { runId: string; at: number }>();
    // Idempotent by dedupe key: a start that met the failover is repeated until a primary takes it.
    const startRun = async (input: ChaosOrderInput): Promise<void> => {
      for (let attempt = 1; ; attempt++) {
        try {
          const { runId } = await client.start(chaosOrder, input, { dedupeKey: input.orderId });
          acknowledgedStarts.set(input.orderId, { runId, at: Date.now() });
          return;
        } catch (error) {
          if (attempt >= 300) throw error;
          await sleep(100);
        }
      }
    };

    fleet.start();
    await waitForWorkers(ackDir, options.workers);
    // Starts go out at a steady pace, never awaited by the controller: a start blocked on a
    // synchronous commit during the partition must not hold up the kill.
    const pending = [...inputs];
    const inFlight: Array<Promise<void>> = [];
    const perTick = Math.max(1, Math.ceil(options.runs / (options.startsOverMs / 100)));
    const feeder = setInterval(() => {
      for (const input of pending.splice(0, perTick)) inFlight.push(startRun(input));
      if (pending.length === 0) clearInterval(feeder);
    }, 100);

    await sleep(options.loadMs);
    // Clients waiting for runs when the database fails over: their waits (and the client's
    // LISTEN connection) must carry on on the new primary. A wait that meets the outage throws
    // a connection error, and is repeated, as an application would.
    const waitedRuns = [...acknowledgedStarts.values()].slice(-WAITS).map((s) => s.runId);
    const waits = waitedRuns.map((runId) => waitAcrossFailover(client, runId, options.settleTimeoutMs));
    options.log(`${mode}: failing the primary at ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const { cutAt, killAt } = await target.fail();
    options.log(`${mode}: primary gone (${killAt - cutAt} ms after the standby was cut off)`);

    // What the standby kept is what promotion keeps: read it once it has replayed all it received
    // — and before it takes a write, or redone work would hide what was lost.
    const snapshot = await readStandby(target.standbyUrl);
    const promoteAt = Date.now();
    const [{ writable } = { writable: true }] = await query<{ writable: boolean }>(
      target.standbyUrl,
      `SELECT NOT (pg_is_in_recovery() OR current_setting('default_transaction_read_only')::bool) AS writable`,
    );
    if (writable)
      throw new Error(
        `${mode}: the standby accepted writes before it was read; what it kept cannot be told from what was redone`,
      );
    await target.promote();
    options.log(`${mode}: the standby accepts writes`);

    await Promise.all(inFlight);
    clearInterval(feeder);
    for (const input of pending.splice(0)) await startRun(input);
    const unsettled = await waitUntilSettled(store, options.settleTimeoutMs);
    const tokensBelowFloor = await countTokensBelowFloor(target.standbyUrl, snapshot);
    const waitOutcomes = await Promise.all(waits);
    // A worker re-subscribes with a backoff of up to 5 s; give the last one time to come back.
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(200)) {
      if (readAcks(ackDir).filter((a) => a.type === 'listener-restored' && a.at > promoteAt).length >= options.workers)
        break;
    }
    const aftermath = (await target.aftermath?.()) ?? '';
    await fleet.stop();

    const acks = readAcks(ackDir);
    const stepAcks = acks.filter((a): a is Extract<AckLine, { type: 'step' }> => a.type === 'step');
    // Nothing is acknowledged between the kill and the promotion (no host accepts writes), so
    // "before promotion" is "by the old primary".
    const startsBefore = [...acknowledgedStarts.values()].filter((s) => s.at < promoteAt);
    const lostRuns = startsBefore.filter((s) => !snapshot.runs.has(s.runId)).length;
    const intentsBefore = [...payments.firstRequestAt, ...email.firstRequestAt]
      .filter(([, at]) => at < promoteAt)
      .map(([key]) => key);
    const lostIntentKeys = intentsBefore.filter((key) => !snapshot.effectKeys.has(key));
    const recordedBefore = stepAcks.filter((a) => a.at < promoteAt && LEDGER_STEPS.has(a.step));
    const lostRecorded = recordedBefore.filter((a) => !snapshot.recorded.has(`${a.runId}/${a.step}`)).length;
    const sentByReference = email.stats().sentByReference;
    const duplicateEmails = Object.values(sentByReference).reduce((sum, n) => sum + Math.max(0, n - 1), 0);
    const duplicateCharges = Object.values(payments.stats().chargesByKey).reduce(
      (sum, n) => sum + Math.max(0, n - 1),
      0,
    );
    const secondCallsAfterLostIntent = lostIntentKeys.filter((key) => (sentByReference[key] ?? 0) > 1).length;
    const firstNewAck = stepAcks.filter((a) => a.at > promoteAt).reduce((min, a) => Math.min(min, a.at), Infinity);

    const acksWhileCut = stepAcks.filter((a) => a.at >= cutAt && a.at < killAt);

    const report = await checkInvariants(target.standbyUrl, chaosOrder.name, { payments, email });
    const outcome = {
      startsAcked: startsBefore.length,
      lostRuns,
      intentsAcked: intentsBefore.length,
      lostIntents: lostIntentKeys.length,
      recordedAcked: recordedBefore.length,
      lostRecorded,
      duplicateEmails,
      duplicateCharges,
      chargeReplays: payments.stats().replays,
      secondCallsAfterLostIntent,
      acksDuringPartition: acksWhileCut.length,
      latestAckWhileCutMs: acksWhileCut.reduce((max, a) => Math.max(max, a.at - cutAt), 0),
      waitsCompleted: waitOutcomes.filter((o) => o === 'completed').length,
      waits: waitOutcomes,
      acksBeforeCut: stepAcks.filter((a) => a.at >= cutAt - 1_000 && a.at < cutAt).length,
      workerRestarts: fleet.counters.spawned - options.workers,
      unexpectedExits: fleet.unexpected,
      listenersRestored: acks.filter((a) => a.type === 'listener-restored' && a.at > promoteAt).length,
      failoverSeconds: (firstNewAck - killAt) / 1000,
      unsettled,
      tokensBelowFloor,
      aftermath,
      report,
    };
    const summary =
      `failover ${mode}: runs=${report.runs} completed=${report.completed} unsettled=${unsettled} ` +
      `acked-starts=${outcome.startsAcked} lost-runs=${outcome.lostRuns} ` +
      `acked-intents=${outcome.intentsAcked} lost-intents=${outcome.lostIntents} ` +
      `acked-recorded=${outcome.recordedAcked} lost-recorded=${outcome.lostRecorded} ` +
      `duplicate-emails=${outcome.duplicateEmails} (after a lost intent: ${outcome.secondCallsAfterLostIntent}) ` +
      `duplicate-charges=${outcome.duplicateCharges} charge-replays=${outcome.chargeReplays} ` +
      `acks-in-last-second-before-cut=${outcome.acksBeforeCut} ` +
      `acks-while-standby-cut-off=${outcome.acksDuringPartition} (latest ${outcome.latestAckWhileCutMs} ms after the cut) ` +
      `waits-across-failover-completed=${outcome.waitsCompleted}/${waitOutcomes.length} ` +
      `partition=${killAt - cutAt}ms kill-to-first-commit=${outcome.failoverSeconds.toFixed(1)}s ` +
      `tokens-below-floor=${tokensBelowFloor} ` +
      `worker-restarts=${outcome.workerRestarts} listeners-restored=${outcome.listenersRestored}/${options.workers} ` +
      `violations=${report.violations.length}${aftermath === '' ? '' : ` ${aftermath}`} in ${((performance.now() - started) / 1000).toFixed(0)} s`;
    return { ...outcome, summary };
  } finally {
    await fleet?.stop(2_000).catch(() => {});
    await store?.close().catch(() => {});
    await fakes.close().catch(() => {});
    await target.close().catch(() => {});
    rmSync(ackDir, { recursive: true, force: true });
  }
}

async function query<R extends pg.QueryResultRow>(url: string, text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Until the primary reports the standby streaming, in the expected mode. */
async function waitForStandby(primary: PostgresServer, syncState: 'sync' | 'async'): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const rows = await query<{ sync_state: string }>(
      primary.url,
      `SELECT sync_state FROM pg_stat_replication WHERE application_name = '${STANDBY_NAME}' AND state = 'streaming'`,
    );
    if (rows[0]?.sync_state === syncState) return;
    if (Date.now() > deadline)
      throw new Error(`the standby did not stream as ${syncState} within 30 s: ${JSON.stringify(rows)}`);
    await sleep(100);
  }
}

interface StandbySnapshot {
  readonly runs: ReadonlySet<string>;
  /** Idempotency keys with a ledger row, whatever its status. */
  readonly effectKeys: ReadonlySet<string>;
  /** `runId/step` of recorded ledger rows. */
  readonly recorded: ReadonlySet<string>;
  /** Each run's fencing token, as text. */
  readonly tokens: ReadonlyMap<string, string>;
  /** `runId/step/attempt` of the attempts. */
  readonly attempts: ReadonlySet<string>;
}

/** The standby's data once replay has caught up with everything received (the primary is gone). */
async function readStandby(url: string): Promise<StandbySnapshot> {
  const deadline = Date.now() + 30_000;
  // Caught up: replay reached what was received — or, when the primary died in the middle of
  // sending a WAL record, the last whole record: replay never passes a torn one, so it is done
  // once neither position has moved for 3 s.
  let last = '';
  let still = Date.now();
  for (;;) {
    const [lsn] = await query<{ caught_up: boolean; at: string }>(
      url,
      `SELECT pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() AS caught_up,
              pg_last_wal_receive_lsn()::text || '/' || pg_last_wal_replay_lsn()::text AS at`,
    );
    if (lsn?.caught_up === true) break;
    if (lsn?.at !== last) {
      last = lsn?.at ?? '';
      still = Date.now();
    } else if (Date.now() - still >= 3_000) {
      break;
    }
    if (Date.now() > deadline)
      throw new Error(`the standby did not replay what it received within 30 s (received/replayed ${last})`);
    await sleep(50);
  }
  const runs = await query<{ id: string; fencing_token: string }>(
    url,
    'SELECT id, fencing_token FROM ledgerflow.workflow_run',
  );
  const attempts = await query<{ key: string }>(
    url,
    `SELECT run_id || '/' || step_name || '/' || attempt AS key FROM ledgerflow.step_attempt`,
  );
  const effects = await query<{ workflow_id: string; step_name: string; idempotency_key: string; status: string }>(
    url,
    'SELECT workflow_id, step_name, idempotency_key, status FROM ledgerflow.step_effect',
  );
  return {
    runs: new Set(runs.map((r) => r.id)),
    effectKeys: new Set(effects.map((e) => e.idempotency_key)),
    recorded: new Set(effects.filter((e) => e.status === 'recorded').map((e) => `${e.workflow_id}/${e.step_name}`)),
    tokens: new Map(runs.map((r) => [r.id, r.fencing_token])),
    attempts: new Set(attempts.map((a) => a.key)),
  };
}

/**
 * Attempts the promoted server has that its standby did not, under a token below the first one
 * its timeline issues, and not the token the standby held for the run (the lease of a worker
 * whose claim survived): tokens issued after the promotion that the old primary may have issued
 * too. Every claim opens an attempt under the token it issues, and every commit closes or opens
 * one under the lease's. The floor is the test's own arithmetic, not core 0023's function.
 */
async function countTokensBelowFloor(url: string, snapshot: StandbySnapshot): Promise<number> {
  const rows = await query<{ key: string; run_id: string; fencing_token: string }>(
    url,
    `SELECT run_id || '/' || step_name || '/' || attempt AS key, run_id, fencing_token
       FROM ledgerflow.step_attempt
      WHERE fencing_token < (ledgerflow.wal_timeline() - 1) * 4294967296`,
  );
  return rows.filter((r) => !snapshot.attempts.has(r.key) && snapshot.tokens.get(r.run_id) !== r.fencing_token).length;
}

/**
 * One `waitForRun` across the failover: it must ride out the lost connections and the time with
 * no writable host by itself. Returns the run's status, or the name of the error that ended it.
 */
async function waitAcrossFailover(client: Client, runId: string, timeoutMs: number): Promise<string> {
  try {
    return (await client.waitForRun(runId, { timeoutMs, pollMs: 100 })).status;
  } catch (error) {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  }
}

/** Until every worker process has started its worker (tsx takes seconds on a busy machine). */
async function waitForWorkers(ackDir: string, workers: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (readAcks(ackDir).filter((a) => a.type === 'worker-started').length < workers) {
    if (Date.now() > deadline) throw new Error(`${workers} workers did not start within 60 s`);
    await sleep(100);
  }
}

function readAcks(dir: string): AckLine[] {
  return readdirSync(dir).flatMap((file) =>
    readFileSync(join(dir, file), 'utf8')
      .split('\n')
      .slice(0, -1) // whole lines only: the last may be half-written while a worker runs
      .map((line) => JSON.parse(line) as AckLine),
  );
}

/** Waits until no run is unfinished, or the timeout; returns how many are left. */
async function waitUntilSettled(store: Store, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  let unfinished = Number.NaN;
  for (;;) {
    try {
      const row = await store.db
        .selectFrom('ledgerflow.workflow_run')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', 'in', ['pending', 'running', 'waiting', 'needs_reconciliation'])
        .executeTakeFirstOrThrow();
      unfinished = Number(row.n);
      if (unfinished === 0) return 0;
    } catch {
      // Between the kill and the promotion no host accepts writes; the store finds the new primary.
    }
    if (performance.now() > deadline) return unfinished;
    await sleep(250);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
