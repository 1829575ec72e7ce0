import { performance } from 'node:perf_hooks';
import { sql, type Generated } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createClient, createWorker, type WorkerEvent, type WorkflowHandlers } from 'ledgerflow/runtime';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { startPostgres, type PostgresServer } from '../support/postgres-server.js';

/**
 * The database out of connections (PostgreSQL only: PGlite has one connection, in process), on
 * a server of its own. The worker connects as a role of its own; while it drives runs, the role's
 * CONNECTION LIMIT drops to 0 and its sessions are ended, so every reconnect it tries is refused
 * with SQLSTATE 53300 ("too many connections for role") — the refusal PostgreSQL gives at
 * max_connections too, made deterministic (filling max_connections races the worker's own
 * reconnects for the freed slots). The worker must report it, back off (a bounded number of
 * tries, not a spin), never record the refusal as a failed attempt of a step, and finish every
 * run once it may connect again, each transactional write exactly once.
 */
const ROLE = 'ooc_worker';
const RUNS = 24;

const booking = workflow('ooc-booking', { version: 1, input: z.object({ n: z.number().int() }) })
  .step('prepare', {
    output: z.object({ n: z.number() }),
    retry: { maxAttempts: 3, initialDelayMs: 20, maxDelayMs: 100, backoffFactor: 2, jitter: 0 },
  })
  .transactional('book', {
    output: z.object({ bookingId: z.number() }),
    key: ({ input }) => `book:${input.n}`,
    retry: { maxAttempts: 3, initialDelayMs: 20, maxDelayMs: 100, backoffFactor: 2, jitter: 0 },
  })
  .step('confirm', {
    output: z.object({ ok: z.boolean() }),
    retry: { maxAttempts: 3, initialDelayMs: 20, maxDelayMs: 100, backoffFactor: 2, jitter: 0 },
  });

interface AppDatabase {
  'ooc_app.booking': { id: Generated<number>; run_id: string; n: number };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const handlers: WorkflowHandlers<typeof booking, AppDatabase> = {
  prepare: async ({ input }) => {
    await pause(40);
    return { n: input.n };
  },
  book: async (ctx) => {
    const row = await ctx.tx
      .insertInto('ooc_app.booking')
      .values({ run_id: ctx.runId, n: ctx.input.n })
      .returning('id')
      .executeTakeFirstOrThrow();
    return ctx.record({ bookingId: Number(row.id) });
  },
  confirm: async () => {
    await pause(40);
    confirming += 1;
    await gate;
    confirming -= 1;
    return { ok: true };
  },
};

/**
 * Holds `confirm` when the outage starts, so that the completion commits of the runs in flight
 * meet it: without it, whether any commit is caught depends on timing (plain steps' results ride
 * on the next commit, so a run spends little of its time committing).
 */
let gate: Promise<void> | undefined;
let confirming = 0;

interface Outcome {
  /** Every event reported during the outage. */
  readonly duringOutage: readonly WorkerEvent[];
  /** Those that carried the refusal. */
  readonly refusals: readonly WorkerEvent[];
  readonly takeovers: number;
  readonly completed: number;
  readonly statuses: readonly { readonly status: string; readonly n: number }[];
  readonly bookings: { readonly runs: number; readonly rows: number };
  readonly recorded: number;
  readonly abandoned: number;
  /** Failed attempts whose error is the database's refusal. */
  readonly blamed: number;
}

const REFUSAL = /too many connections for role/;

describe('a worker when the database is out of connections [pg]', () => {
  let server: PostgresServer;
  let admin: pg.Client;
  beforeAll(async () => {
    server = await startPostgres();
    admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query(`CREATE ROLE ${ROLE} LOGIN`);
  });
  afterAll(async () => {
    await admin?.end().catch(() => {});
    await server?.destroy();
  });

  /** RUNS runs on a fresh database; `outageMs` without connections once the first completed. */
  async function outage(database: string, outageMs: number, leaseMs: number): Promise<Outcome> {
    await admin.query(`CREATE DATABASE ${database} OWNER ${ROLE}`);
    const asWorker = new URL(server.urlFor(database));
    asWorker.username = ROLE;
    const url = asWorker.toString();
    const setup = createPgStore({ connectionString: url, maxConnections: 1 });
    await migrateForTest(setup, [booking]);
    await sql`CREATE SCHEMA ooc_app; CREATE TABLE ooc_app.booking (id serial PRIMARY KEY, run_id uuid NOT NULL, n int NOT NULL)`.execute(
      setup.db,
    );
    const client = createClient({ store: setup });
    for (let n = 0; n < RUNS; n++) await client.start(booking, { n });
    await setup.close();

    const events: { readonly at: number; readonly event: WorkerEvent }[] = [];
    const store = createPgStore({ connectionString: url, maxConnections: 4 });
    const worker = createWorker({
      store,
      workflows: [bindHandlers(booking, handlers, shapeHash(booking))],
      concurrency: 3,
      leaseMs,
      pollIntervalMs: 50,
      reconcileIntervalMs: 0,
      onEvent: (event) => events.push({ at: performance.now(), event }),
    });
    let outageStarted = 0;
    let outageEnded = 0;
    try {
      await worker.start();
      // Let it get going, then leave its role no connection and end the ones it has.
      while (!events.some((e) => e.event.type === 'run-completed')) await pause(10);
      let release = (): void => {};
      gate = new Promise<void>((resolve) => (release = resolve));
      const held = performance.now() + 10_000;
      while (confirming === 0 && performance.now() < held) await pause(5);
      await admin.query(`ALTER ROLE ${ROLE} CONNECTION LIMIT 0`);
      outageStarted = performance.now();
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '${ROLE}'`);
      // The held runs' completion commits now meet the outage.
      release();
      gate = undefined;
      await pause(outageMs);
      outageEnded = performance.now();
      await admin.query(`ALTER ROLE ${ROLE} CONNECTION LIMIT -1`);
      const deadline = performance.now() + 60_000;
      while (events.filter((e) => e.event.type === 'run-completed').length < RUNS && performance.now() < deadline)
        await pause(50);
    } finally {
      await admin.query(`ALTER ROLE ${ROLE} CONNECTION LIMIT -1`);
      await worker.stop({ timeoutMs: 5_000 }).catch(() => {});
      await store.close().catch(() => {});
    }

    const check = new pg.Client({ connectionString: server.urlFor(database) });
    await check.connect();
    try {
      const one = async (query: string) => (await check.query<{ n: number }>(query)).rows[0]!.n;
      const statuses = await check.query<{ status: string; n: number }>(
        'SELECT status, count(*)::int AS n FROM ledgerflow.workflow_run GROUP BY status ORDER BY status',
      );
      const bookings = await check.query<{ runs: number; rows: number }>(
        'SELECT count(DISTINCT run_id)::int AS runs, count(*)::int AS rows FROM ooc_app.booking',
      );
      const duringOutage = events.filter((e) => e.at >= outageStarted && e.at <= outageEnded + 100).map((e) => e.event);
      return {
        duringOutage,
        refusals: duringOutage.filter((e) => 'error' in e && REFUSAL.test(e.error.message)),
        takeovers: events.filter((e) => e.event.type === 'run-claimed' && e.event.tookOver).length,
        completed: events.filter((e) => e.event.type === 'run-completed').length,
        statuses: statuses.rows,
        bookings: bookings.rows[0]!,
        recorded: await one(`SELECT count(*)::int AS n FROM ledgerflow.step_effect WHERE status = 'recorded'`),
        abandoned: await one(`SELECT count(*)::int AS n FROM ledgerflow.step_attempt WHERE status = 'abandoned'`),
        blamed: await one(
          `SELECT count(*)::int AS n FROM ledgerflow.step_attempt WHERE status = 'failed' AND error::text ~ 'too many connections'`,
        ),
      };
    } finally {
      await check.end();
    }
  }

  /** What holds whatever the outage's length: reported, backed off, every run done, each write once. */
  function expectRecovered(o: Outcome, outageMs: number): void {
    // Reported: the worker said why it is not making progress (error and commit-outcome-unknown events).
    expect(o.refusals.length).toBeGreaterThan(0);
    // Backed off, not spinning: the claim loop's retries double from 100 ms up to 5 s, so an
    // outage of a few seconds is a handful of claim tries; the listener, the lease renewals and
    // each flight's re-reads back off as well. A spin would be thousands.
    const claims = o.refusals.filter((e) => e.type === 'error' && e.where === 'claim').length;
    expect(claims).toBeLessThanOrEqual(Math.ceil(Math.log2(outageMs / 100)) + 2);
    expect(o.refusals.length).toBeLessThanOrEqual(40);
    expect(o.statuses).toEqual([{ status: 'completed', n: RUNS }]);
    // Each transactional write once, under its one recorded ledger row.
    expect(o.bookings).toEqual({ runs: RUNS, rows: RUNS });
    expect(o.recorded).toBe(RUNS);
    // The database's refusal never counted as a failed attempt of a step.
    expect(o.blamed).toBe(0);
  }

  it('shorter than a lease: reported, backed off, every in-flight step waits and commits; nothing abandoned', async () => {
    const o = await outage('ooc_short', 1_500, 5_000);
    expectRecovered(o, 1_500);
    // No run lost its lease: each step waited for the database and then committed. A commit
    // caught by the outage reports an unknown outcome with whichever error it met first: the
    // refusal of a new connection, or the end of the session it was using (a pooled connection
    // the termination killed before the pool noticed), so either counts here.
    expect(o.duringOutage.some((e) => e.type === 'commit-outcome-unknown')).toBe(true);
    expect(o.abandoned).toBe(0);
    expect(o.takeovers).toBe(0);
  }, 120_000);

  it('longer than a lease: runs are taken over after it and complete, each write once', async () => {
    const o = await outage('ooc_long', 4_000, 1_500);
    expectRecovered(o, 4_000);
  }, 120_000);
});
