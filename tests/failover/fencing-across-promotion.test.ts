import { sql } from 'kysely';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createClient, createWorker, type Worker, type WorkerEvent } from 'ledgerflow/runtime';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { z } from 'zod';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import type { Store } from '../../runtime/store/store.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { startPostgres, type PostgresServer } from '../support/postgres-server.js';
import { gate, type Gate } from '../runtime/fixtures/test-handlers.js';
import { startReplicationLink, type ReplicationLink } from './replication-link.js';

/**
 * A fencing token is never handed out twice across a promotion (core 0023). A primary with an
 * asynchronous standby; a run the standby has; the standby cut off; worker A claims the run on the
 * primary — acknowledged, never sent to the standby — and blocks in its first step. The primary
 * dies, the standby is promoted without A's claim, and worker B claims the run there. Before core
 * 0023 B got A's token again (the counter rolled back with the lost claim), and A's commit, once
 * its handler returned, was accepted beside B's lease. Now B's token is above the new timeline's
 * floor: A's commit is refused and the run completes with B's work alone, one effect.
 */
const STANDBY_NAME = 'standby1';

const twoTimelines = workflow('fe-two-timelines', { version: 1, input: z.object({ orderId: z.string() }) })
  .step('hold', { output: z.object({ by: z.string() }) })
  .transactional('write', {
    output: z.object({ by: z.string() }),
    key: ({ input }) => `write:${input.orderId}`,
  });

const APP_SQL = `
  CREATE SCHEMA fe_app;
  CREATE TABLE fe_app.effect (run_id uuid NOT NULL, written_by text NOT NULL);`;

/** Worker `label`'s handlers: `hold` waits for `g`, `write` inserts one row (the effect). */
function handlers(label: string, g: Gate) {
  return bindHandlers(
    twoTimelines,
    {
      hold: async () => {
        await g.wait();
        return { by: label };
      },
      write: async ({ tx, runId, record }) => {
        await sql`INSERT INTO fe_app.effect (run_id, written_by) VALUES (${runId}, ${label})`.execute(tx);
        return record({ by: label });
      },
    },
    shapeHash(twoTimelines),
  );
}

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

async function query<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function startWorker(store: Store, label: string, g: Gate, events: WorkerEvent[], leaseMs: number): Worker {
  const worker = createWorker({
    store,
    workflows: [handlers(label, g)],
    workerId: label,
    concurrency: 1,
    leaseMs,
    // No renewal while the test runs: what meets the new primary is A's commit, not its heartbeat.
    heartbeatMs: leaseMs / 2,
    pollIntervalMs: 50,
    reconcileIntervalMs: 0,
    onEvent: (event) => events.push(event),
  });
  cleanups.push(() => worker.stop({ timeoutMs: 500 }));
  return worker;
}

it('refuses the commit of a worker whose claim the promotion lost, and completes the run with one effect', async () => {
  const primary: PostgresServer = await startPostgres({ settings: { synchronous_commit: 'on' } });
  cleanups.push(() => primary.destroy());
  const link: ReplicationLink = await startReplicationLink(primary.port);
  cleanups.push(() => link.close());
  const standby = await startPostgres({
    standbyOf: { port: primary.port, connectPort: link.port, applicationName: STANDBY_NAME },
  });
  cleanups.push(() => standby.destroy());
  await until('the standby to stream asynchronously', async () => {
    const rows = await query<{ sync_state: string }>(
      primary.url,
      `SELECT sync_state FROM pg_stat_replication WHERE application_name = '${STANDBY_NAME}' AND state = 'streaming'`,
    );
    return rows[0]?.sync_state === 'async' ? true : undefined;
  });
  await query(primary.url, 'CREATE DATABASE fencing');
  const url = `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${standby.port}/fencing?target_session_attrs=read-write`;
  const standbyUrl = standby.urlFor('fencing');
  const storeA = createPgStore({ connectionString: url, applicationName: 'worker-a', maxConnections: 4 });
  cleanups.push(() => storeA.close());
  await migrateForTest(storeA, [twoTimelines]);
  await sql.raw(APP_SQL).execute(storeA.db);

  // A run the standby has replayed: the promotion keeps it, pending and never claimed.
  const { runId } = await createClient({ store: storeA }).start(twoTimelines, { orderId: 'o-1' });
  const [{ lsn } = { lsn: '' }] = await query<{ lsn: string }>(primary.url, 'SELECT pg_current_wal_lsn()::text AS lsn');
  await until('the standby to replay the start', async () => {
    const [row] = await query<{ replayed: boolean }>(
      standbyUrl,
      'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS replayed',
      [lsn],
    );
    return row?.replayed === true ? true : undefined;
  });

  // Cut off: what the primary acknowledges from now on never reaches the standby.
  link.cut();
  const gateA = gate();
  const eventsA: WorkerEvent[] = [];
  const workerA = startWorker(storeA, 'A', gateA, eventsA, 120_000);
  await workerA.start();
  await gateA.entered;
  const [claimedA] = await query<{ fencing_token: string; lease_owner: string }>(
    primary.urlFor('fencing'),
    'SELECT fencing_token, lease_owner FROM ledgerflow.workflow_run WHERE id = $1',
    [runId],
  );
  expect(claimedA?.lease_owner).toBe('A');
  const tokenA = Number(claimedA?.fencing_token);

  await primary.kill();
  // The claim is lost with the primary: the standby has the run as it was before it.
  const [kept] = await query<{ status: string; fencing_token: string }>(
    standbyUrl,
    'SELECT status, fencing_token FROM ledgerflow.workflow_run WHERE id = $1',
    [runId],
  );
  expect(kept).toEqual({ status: 'pending', fencing_token: '0' });
  await standby.promote();
  const [{ timeline } = { timeline: '' }] = await query<{ timeline: string }>(
    standbyUrl,
    'SELECT ledgerflow.wal_timeline()::text AS timeline',
  );
  expect(timeline).toBe('2');

  // B claims the run on the new primary, and holds it in its first step.
  const storeB = createPgStore({ connectionString: url, applicationName: 'worker-b', maxConnections: 4 });
  cleanups.push(() => storeB.close());
  const gateB = gate();
  const eventsB: WorkerEvent[] = [];
  await startWorker(storeB, 'B', gateB, eventsB, 30_000).start();
  await gateB.entered;
  const claimedB = eventsB.find((e) => e.type === 'run-claimed' && e.runId === runId);
  const tokenB = claimedB?.type === 'run-claimed' ? claimedB.fencingToken : Number.NaN;
  // Before core 0023 this was A's token again.
  expect(tokenB, `A holds ${tokenA}`).not.toBe(tokenA);
  expect(tokenB).toBe(2 ** 32);

  // A's store has found the new primary; A's handler returns and A commits there.
  await until('worker A to listen on the new primary', async () =>
    eventsA.some((e) => e.type === 'listener-restored') ? true : undefined,
  );
  gateA.open();
  const outcomeA = await until('worker A to learn the outcome of its commit', async () =>
    eventsA.find(
      (e) => (e.type === 'lease-lost' || e.type === 'step-succeeded' || e.type === 'step-failed') && e.runId === runId,
    ),
  );
  expect(outcomeA).toMatchObject({ type: 'lease-lost', runId, fencingToken: tokenA });

  gateB.open();
  const storeNew = createPgStore({ connectionString: standbyUrl, maxConnections: 2 });
  cleanups.push(() => storeNew.close());
  const done = await createClient({ store: storeNew }).waitForRun(runId, { timeoutMs: 30_000 });
  expect(done.status).toBe('completed');

  // Nothing of A's: no attempt, no result, no ledger row, no effect.
  const attempts = await query<{ step_name: string; status: string; worker_id: string; fencing_token: string }>(
    standbyUrl,
    'SELECT step_name, status, worker_id, fencing_token FROM ledgerflow.step_attempt WHERE run_id = $1 ORDER BY step_name',
    [runId],
  );
  expect(attempts).toEqual([
    { step_name: 'hold', status: 'succeeded', worker_id: 'B', fencing_token: String(tokenB) },
    { step_name: 'write', status: 'succeeded', worker_id: 'B', fencing_token: String(tokenB) },
  ]);
  const results = await query<{ step_name: string; output: unknown }>(
    standbyUrl,
    'SELECT step_name, output FROM ledgerflow.step_result WHERE run_id = $1 ORDER BY step_name',
    [runId],
  );
  expect(results).toEqual([
    { step_name: 'hold', output: { by: 'B' } },
    { step_name: 'write', output: { by: 'B' } },
  ]);
  const effects = await query<{ step_name: string; fencing_token: string; status: string }>(
    standbyUrl,
    'SELECT step_name, fencing_token, status FROM ledgerflow.step_effect WHERE workflow_id = $1',
    [runId],
  );
  expect(effects).toEqual([{ step_name: 'write', fencing_token: String(tokenB), status: 'recorded' }]);
  expect(await query(standbyUrl, 'SELECT written_by FROM fe_app.effect WHERE run_id = $1', [runId])).toEqual([
    { written_by: 'B' },
  ]);
}, 180_000);
