/**
 * The in-process test environment of `ledgerflow/testing`: an embedded PGlite database migrated
 * for the workflows under test, a client, workers that run until nothing is due, a clock the test
 * moves, in-process crashes, and the ledger to assert on.
 *
 * States of an environment: open ──runUntilIdle()──▶ running a worker ──idle / crash / timeout──▶
 * open; open ──close()──▶ closed. One worker at a time: `advanceTime`, `reset` and a second
 * `runUntilIdle` are refused while a worker runs, so the clock never jumps under a live lease.
 *
 * Long because `TestEnvironment` is the public surface of `ledgerflow/testing`, each method with
 * its documentation, and `InProcessEnvironment` its one implementation, whose methods share one
 * database, clock and worker.
 */

import { sql } from 'kysely';
import { z } from 'zod';
import { checkOptions, rule } from '../../dsl/option-checks.js';
import type { AnySchedule } from '../../dsl/schedule.js';
import { shapeOf } from '../../dsl/workflow-shape.js';
import { workflowVersionMigrationSuffix, workflowVersionSql } from '../../codegen/emit/workflow-version-sql.js';
import { createClient, type Client } from '../client/client.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import { configureFaults, onFaultFired, type FaultPointName, type FaultPointSpec } from '../faults/fault-points.js';
import { migrate } from '../migrate/migrate.js';
import { loadMigrations, type MigrationFile, type MigrationSource } from '../migrate/migration-source.js';
import { runReconcilePass } from '../reconciler/reconciler.js';
import type { Store } from '../store/store.js';
import type { RunStatus, StepEffectRow } from '../store/tables.js';
import { DUE_RUN_STATUSES, sqlStatusList } from '../store/state-machines.js';
import { createWorker } from '../worker/worker.js';
import type { WorkerEvent } from '../worker/worker-events.js';
import { ofServedVersion } from '../worker/registry.js';
import { crashableStore, type CrashableStore } from './crashable-store.js';
import { createCoreMigratedPGlite } from './pglite-template.js';
import { assertLedger, expectEachKeyOnce, type LedgerExpectation } from './ledger-assertions.js';
import { advanceTestClock, advanceTestClockPastHorizons, installTestClock, testClockNow } from './test-clock.js';

export interface TestEnvironmentOptions {
  /** The workflow versions under test, with their handlers (fakes of your providers, usually). */
  readonly workflows: readonly WorkflowRegistration[];
  /**
   * Migrations applied after ledgerflow's core schema: your own tables' folder and, if you ran
   * codegen, `generated/migrations` (as for `ledgerflow migrate`; relative to the working
   * directory). The version of a workflow in `workflows` that no source registers is built from
   * its definition, as codegen would emit it — so a test needs no codegen run.
   */
  readonly migrations?: readonly MigrationSource[];
  /** Your schemas whose tables `reset()` empties too, e.g. `['shop']`. */
  readonly resetSchemas?: readonly string[];
  /** Schedules the workers register and tick (on the test clock). */
  readonly schedules?: readonly AnySchedule[];
  /** The workers' lease. Default 30 000: after a crash, `advanceTime(env.leaseMs)` lets a new worker take over. */
  readonly leaseMs?: number;
  /** Runs a worker drives at once. Default 4. */
  readonly concurrency?: number;
}

/** A run that a `runUntilIdle` call claimed, with its status when the call returned. */
export interface TouchedRun {
  readonly id: string;
  readonly workflow: string;
  readonly status: RunStatus;
}

/** What one `runUntilIdle` did. */
export interface IdleReport {
  /** Runs the worker claimed (in the order first claimed), and where each stands now. */
  readonly runs: readonly TouchedRun[];
  /** The fault point the worker crashed at (see `crashAt`), or undefined if it went idle. */
  readonly crashedAt: FaultPointName | undefined;
  /**
   * Runs still `running` under the lease of a crashed worker: nobody may take them over until the
   * lease expires — `advancePastHorizons()` (which also passes the horizons of the intents it left
   * open), then `runUntilIdle()` again.
   */
  readonly heldByCrashedWorker: readonly string[];
  /** Everything the worker reported (claims, steps, failures, errors), in order. */
  readonly events: readonly WorkerEvent[];
}

export interface TestEnvironment {
  /** The embedded database (PGlite, in memory), on the test clock. */
  readonly store: Store;
  /** A client on `store` that knows `workflows` (start, getRun, sendEvent, listEffects, …). */
  readonly client: Client;
  /** The workers' lease in milliseconds. */
  readonly leaseMs: number;
  /**
   * Starts a worker and lets it work until nothing is due *now* on the test clock — no run
   * pending or waiting with its time come, none running under its lease or an expired one, no
   * intent past its horizon that a reconcile pass can settle, no due schedule tick — then stops it
   * and reports. A retry backoff, a sleep or a timeout in the future is not waited for: move the
   * clock with `advanceTime` and call again. If a `crashAt` fault fires, the worker "dies" there
   * and the call returns at once with `crashedAt`. Rejects after `timeoutMs` of wall time
   * (default 10 000) naming what is left.
   *
   * @example
   * const { runId } = await env.client.start(refund, { orderId: 'o-1', amountCents: 500 });
   * await env.runUntilIdle();
   * expect((await env.client.getRun(runId)).status).toBe('completed');
   */
  runUntilIdle(options?: { readonly timeoutMs?: number }): Promise<IdleReport>;
  /**
   * Moves database time forward by `ms`, at once: every instant the runtime stored — retry
   * backoffs, sleeps, waitFor timeouts, run deadlines, leases, intent horizons, debounce windows,
   * schedule ticks, queue rate windows — comes `ms` closer to due. Resolves to the new time.
   *
   * @example
   * await env.advanceTime(60 * 60_000); // the one-hour retry backoff is over
   * await env.runUntilIdle();
   */
  advanceTime(ms: number): Promise<Date>;
  /**
   * Moves database time just far enough that whatever a crashed (or timed-out) attempt left
   * behind may be taken up again: every lease still held has expired and every open intent's
   * horizon has passed (intent time + lease + the step's `performTimeoutMs`, or the backoff of an
   * inconclusive `reconcile`). The next `runUntilIdle()` then takes the run over and settles the
   * intent the way the step's flavour does: an `idempotentByKey` step calls again with the same
   * key, a step with `reconcile` looks it up. Retry backoffs, sleeps and timeouts are not moved
   * past (`advanceTime` is for those). Resolves to the new time; does nothing if nothing is open.
   *
   * @example
   * env.crashAt('after-perform'); // the provider applied it; the worker dies before recording it
   * await env.runUntilIdle();
   * await env.advancePastHorizons(); // the dead worker's lease and its intent's horizon are over
   * await env.runUntilIdle(); // a new worker takes the run over and settles the intent
   */
  advancePastHorizons(): Promise<Date>;
  /** The test clock's current time (database time, as the runtime sees it). */
  now(): Promise<Date>;
  /**
   * Makes the next worker "crash" at a fault point, as if its process were killed there: from that
   * moment nothing it sends reaches the database (its leases stay held, its intents open, its
   * attempt unfinished), and `runUntilIdle` returns with `crashedAt`. `times` (default 1) is how
   * many times the point fires. Fault points are process-wide: crashes are for one environment of
   * a test file at a time (vitest runs each file in its own worker).
   *
   * @example
   * env.crashAt('after-perform'); // the provider applied the charge; the worker dies before recording it
   * await env.runUntilIdle();
   * await env.advancePastHorizons(); // its lease expires and its intent's horizon passes
   * await env.runUntilIdle(); // a new worker takes the run over
   */
  crashAt(point: FaultPointName, options?: { readonly times?: number }): void;
  /** Ledger rows (`step_effect`) of one run, or of every run, oldest intent first. */
  ledger(runId?: string): Promise<StepEffectRow[]>;
  /** {@link assertLedger} over `ledger(runId)` (every run when `runId` is undefined). */
  assertLedger(runId: string | undefined, expected?: LedgerExpectation): Promise<void>;
  /** {@link expectEachKeyOnce} over the whole ledger: no key recorded (or open) twice, across runs. */
  expectEachKeyOnce(): Promise<void>;
  /**
   * Empties ledgerflow's run tables (runs, attempts, ledger, waits, events, queues, schedules,
   * archives, audit) and the tables of `resetSchemas`, puts the clock back, and disarms crashes —
   * in one transaction, in milliseconds. The migrations stay: use one environment per test file
   * (creating one costs seconds) and `reset()` between tests.
   */
  reset(): Promise<void>;
  /** Stops everything and closes the database. */
  close(): Promise<void>;
}

/** Run tables of ledgerflow that `reset()` empties: everything but the migrations and the versions they registered. */
const RUN_TABLES = [
  'workflow_run',
  'step_attempt',
  'step_effect',
  'step_result',
  'step_wait',
  'event',
  'schedule',
  'queue',
  'queue_partition',
  'queue_grant',
  'queue_slot',
  'queue_waiter',
  'operator_action',
  'run_archive',
  'effect_archive',
] as const;

const DEFAULT_IDLE_TIMEOUT_MS = 10_000;

/** What {@link TestEnvironmentOptions} allow: the core schema and PostgreSQL's own are never reset. */
const testEnvironmentOptionsSchema = z.object({
  workflows: z
    .unknown()
    .refine(
      (workflows) => Array.isArray(workflows) && workflows.length > 0,
      'is empty: pass the registrations of the workflows under test (e.g. [refundRegistration(fakePayments)])',
    ),
  leaseMs: rule(z.number().gt(0), 'must be > 0').optional(),
  resetSchemas: rule(z.array(z.string()), 'must be a list of schema names')
    .superRefine((schemas, ctx) => {
      for (const schema of schemas) {
        if (schema === 'ledgerflow' || schema.startsWith('pg_'))
          ctx.addIssue({ code: 'custom', message: `may not name "${schema}"` });
      }
    })
    .optional(),
});

/**
 * Creates an in-process environment for testing your workflows: an in-memory PGlite migrated
 * with ledgerflow's core schema, your `migrations` and the versions of `workflows`, on a clock the
 * test moves. Creating one takes a second or more (PGlite boots; the migrated core schema is
 * cached as a data directory dump under the OS temp directory): create one per test file and call
 * `reset()` between tests.
 *
 * @example
 * const env = await createTestEnvironment({ workflows: [refundRegistration(fakePayments)], migrations: ['db/migrations'] });
 * afterAll(() => env.close());
 * beforeEach(() => env.reset());
 */
export async function createTestEnvironment(options: TestEnvironmentOptions): Promise<TestEnvironment> {
  checkOptions(
    testEnvironmentOptionsSchema,
    options,
    (problems) => new TypeError(`Invalid test environment options: ${problems.join('; ')}.`),
  );
  const leaseMs = options.leaseMs ?? 30_000;

  const sources = options.migrations ?? [];
  const store = await createCoreMigratedPGlite();
  try {
    await migrate(store, { sources: [...sources, missingVersionMigrations(options.workflows, sources)] });
    await installTestClock(store.db);
  } catch (error) {
    await store.close();
    throw error;
  }
  return new InProcessEnvironment(store, options, leaseMs);
}

/** The per-version migrations codegen would emit, for the versions no source registers. */
function missingVersionMigrations(
  workflows: readonly WorkflowRegistration[],
  sources: readonly MigrationSource[],
): MigrationFile[] {
  const given = loadMigrations(sources).map((m) => m.name);
  const seen = new Set<string>();
  const built: MigrationFile[] = [];
  for (const { workflow } of workflows) {
    const shape = shapeOf(workflow);
    const suffix = `_${workflowVersionMigrationSuffix(shape)}`;
    if (seen.has(suffix) || given.some((name) => name.endsWith(suffix))) continue;
    seen.add(suffix);
    built.push({ name: `9000${suffix}`, sql: workflowVersionSql(shape) });
  }
  return built;
}

class InProcessEnvironment implements TestEnvironment {
  readonly client: Client;
  readonly #armed = new Map<FaultPointName, FaultPointSpec>();
  readonly #unsubscribe: () => void;
  #worker: CrashableStore | undefined;
  #crashedAt: FaultPointName | undefined;
  #busy = false;
  #closed = false;

  constructor(
    readonly store: Store,
    private readonly options: TestEnvironmentOptions,
    readonly leaseMs: number,
  ) {
    this.client = createClient({ store, workflows: options.workflows });
    this.#unsubscribe = onFaultFired((firing) => {
      const worker = this.#worker;
      if (worker === undefined || !this.#armed.has(firing.point)) return;
      this.#crashedAt ??= firing.point;
      worker.crash(`crashAt('${firing.point}')`);
    });
  }

  async runUntilIdle(options: { readonly timeoutMs?: number } = {}): Promise<IdleReport> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.#enter('runUntilIdle');
    const events: WorkerEvent[] = [];
    const touched = new Map<string, string>();
    const crashable = crashableStore(this.store);
    const schedules = this.options.schedules ?? [];
    const worker = createWorker({
      store: crashable.store,
      workflows: this.options.workflows,
      schedules,
      leaseMs: this.leaseMs,
      concurrency: this.options.concurrency ?? 4,
      pollIntervalMs: 10,
      reconcileIntervalMs: 0,
      scheduleIntervalMs: schedules.length > 0 ? 10 : 0,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'run-claimed' && !touched.has(event.runId)) touched.set(event.runId, event.workflow);
      },
    });
    this.#worker = crashable;
    this.#crashedAt = undefined;
    const started = performance.now();
    try {
      await worker.start();
      for (;;) {
        if (crashable.crashed) {
          // A dead process stops at once: no flight is awaited, nothing is released.
          await worker.stop({ timeoutMs: 0 });
          break;
        }
        if (worker.inFlight === 0) {
          const left = await this.#dueWork(worker.id);
          if (left.total === 0 && worker.inFlight === 0 && !crashable.crashed) {
            const report = await runReconcilePass({
              store: this.store,
              workflows: this.options.workflows,
              leaseMs: this.leaseMs,
            });
            if (report.recorded + report.released + report.parked === 0) {
              await worker.stop();
              break;
            }
            continue;
          }
          if (performance.now() - started > timeoutMs) {
            await worker.stop({ timeoutMs: 0 });
            throw new Error(
              `runUntilIdle() timed out after ${timeoutMs} ms with work still due now: ${left.describe}. ` +
                'A handler that never returns, or a run that fails and is retried at once, keeps a worker busy; ' +
                'pass a larger timeoutMs if the work is just slow.',
            );
          }
        } else if (performance.now() - started > timeoutMs) {
          const inFlight = worker.inFlight;
          // Stopping aborts the flights and releases their runs: due again for the next call.
          await worker.stop({ timeoutMs: 0 });
          throw new Error(
            `runUntilIdle() timed out after ${timeoutMs} ms with ${inFlight} run(s) still in flight (a handler that never returns?).`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const held = await this.#heldUnderLease();
      return {
        runs: await this.#touchedRuns(touched),
        crashedAt: crashable.crashed ? this.#crashedAt : undefined,
        heldByCrashedWorker: held,
        events,
      };
    } finally {
      await worker.stop({ timeoutMs: 0 }).catch(() => {});
      this.#worker = undefined;
      this.#busy = false;
    }
  }

  async advanceTime(ms: number): Promise<Date> {
    this.#enter('advanceTime');
    try {
      await advanceTestClock(this.store.db, ms);
      return await testClockNow(this.store.db);
    } finally {
      this.#busy = false;
    }
  }

  async advancePastHorizons(): Promise<Date> {
    this.#enter('advancePastHorizons');
    try {
      await advanceTestClockPastHorizons(this.store.db);
      return await testClockNow(this.store.db);
    } finally {
      this.#busy = false;
    }
  }

  now(): Promise<Date> {
    return testClockNow(this.store.db);
  }

  crashAt(point: FaultPointName, options: { readonly times?: number } = {}): void {
    const times = options.times ?? 1;
    this.#armed.set(point, { probability: 1, actions: ['throw'], times });
    // configureFaults validates the point's name and `times`; counts start afresh per call.
    configureFaults({ seed: 1, points: Object.fromEntries(this.#armed) });
  }

  async ledger(runId?: string): Promise<StepEffectRow[]> {
    let query = this.store.db.selectFrom('ledgerflow.step_effect').selectAll();
    if (runId !== undefined) query = query.where('workflow_id', '=', runId);
    return query.orderBy('intent_at').orderBy('step_name').orderBy('idempotency_key').execute();
  }

  async assertLedger(runId: string | undefined, expected?: LedgerExpectation): Promise<void> {
    assertLedger(await this.ledger(runId), expected);
  }

  async expectEachKeyOnce(): Promise<void> {
    expectEachKeyOnce(await this.ledger());
  }

  async reset(): Promise<void> {
    this.#enter('reset');
    try {
      this.#disarm();
      const appTables = await this.#appTables();
      const tables = [...RUN_TABLES.map((t) => `ledgerflow.${t}`), ...appTables];
      await this.store.db.transaction().execute(async (tx) => {
        await sql.raw(`TRUNCATE ${tables.join(', ')} CASCADE`).execute(tx);
        await sql`UPDATE ledgerflow_test_clock.clock SET offset_ms = 0`.execute(tx);
      });
    } finally {
      this.#busy = false;
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#disarm();
    this.#unsubscribe();
    await this.store.close();
  }

  #enter(what: string): void {
    if (this.#closed) throw new Error(`${what}(): this test environment is closed.`);
    if (this.#busy) {
      throw new Error(
        `${what}(): a runUntilIdle(), advanceTime(), advancePastHorizons() or reset() of this environment is still running; await it first.`,
      );
    }
    this.#busy = true;
  }

  #disarm(): void {
    if (this.#armed.size === 0) return;
    this.#armed.clear();
    configureFaults(undefined);
  }

  /** Work a worker could do now, per kind, for the registered workflow versions and given schedules. */
  async #dueWork(workerId: string): Promise<{ total: number; describe: string }> {
    const registered = this.#registered();
    const scheduleNames = (this.options.schedules ?? []).map((s) => s.name);
    const { rows } = await sql<{ due: number; running: number; ticks: number }>`
      SELECT (SELECT count(*) FROM ledgerflow.workflow_run r
               WHERE r.status IN (${sqlStatusList(DUE_RUN_STATUSES)}) AND r.run_after <= statement_timestamp() AND ${registered})::int AS due,
             (SELECT count(*) FROM ledgerflow.workflow_run r
               WHERE r.status = 'running' AND (r.lease_owner = ${workerId} OR r.lease_expires_at <= statement_timestamp()) AND ${registered})::int AS running,
             (SELECT count(*) FROM ledgerflow.schedule s
               WHERE s.name = ANY(${scheduleNames}::text[]) AND NOT s.paused AND s.next_tick_at <= statement_timestamp()
                 AND (s.retry_at IS NULL OR s.retry_at <= statement_timestamp()))::int AS ticks`.execute(this.store.db);
    const { due, running, ticks } = rows[0]!;
    return {
      total: due + running + ticks,
      describe: `${due} run(s) due, ${running} running, ${ticks} schedule tick(s) due`,
    };
  }

  /** After the worker stopped: runs still under a live lease, which only a crashed worker can have left. */
  async #heldUnderLease(): Promise<string[]> {
    const { rows } = await sql<{ id: string }>`
      SELECT r.id FROM ledgerflow.workflow_run r
       WHERE r.status = 'running' AND r.lease_expires_at > statement_timestamp()
         AND ${this.#registered()}
       ORDER BY r.created_at, r.id`.execute(this.store.db);
    return rows.map((r) => r.id);
  }

  #registered() {
    const names = this.options.workflows.map((w) => w.workflow.name);
    const versions = this.options.workflows.map((w) => w.workflow.version);
    return ofServedVersion({ names, versions });
  }

  async #touchedRuns(touched: ReadonlyMap<string, string>): Promise<TouchedRun[]> {
    if (touched.size === 0) return [];
    const rows = await this.store.db
      .selectFrom('ledgerflow.workflow_run')
      .select(['id', 'status'])
      .where('id', 'in', [...touched.keys()])
      .execute();
    const status = new Map(rows.map((r) => [r.id, r.status]));
    return [...touched].flatMap(([id, workflow]) => {
      const now = status.get(id);
      return now === undefined ? [] : [{ id, workflow, status: now }];
    });
  }

  async #appTables(): Promise<string[]> {
    const schemas = this.options.resetSchemas ?? [];
    if (schemas.length === 0) return [];
    const { rows } = await sql<{ name: string }>`
      SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname = ANY(${schemas}::text[]) ORDER BY 1`.execute(
      this.store.db,
    );
    return rows.map((r) => r.name);
  }
}
