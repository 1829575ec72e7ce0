import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createWorker } from 'ledgerflow/runtime';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { concurrencyQueue, limited, QUEUE_WORKFLOWS, queueHandlers, queueProbe } from './fixtures/queue-workflows.js';
import { registerQueueStatement } from '../../runtime/worker/queue-slots.js';
import { waitUntil } from './fixtures/run-helpers.js';

/**
 * The queue path without a global lock (core 0022): a step behind a queue limited by concurrency
 * alone, while nobody is in its line, takes a numbered slot and gives it back without touching
 * the queue's counter row. Another session holds that row locked (as a grant, a pause or a step
 * commit of the old path did) for the whole drain: the runs still complete, and the slots they
 * held were never counted there. Then the line forms: the next ask that goes to the line counts
 * the slots taken without the counters, so in_flight is exact again for whoever reads it.
 */
describe('a queued step that takes no lock shared by the queue [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, QUEUE_WORKFLOWS);
    await registerQueueStatement(concurrencyQueue).execute(store.db);
  }, 120_000);
  afterAll(() => store.close());

  it('runs steps of a queue that is not full while its counter row is held by another session', async () => {
    const client = createClient({ store });
    const holder = new pg.Client({ connectionString: store.url });
    await holder.connect();
    // One flight at a time: the queue (two slots) is never full, so nobody joins its line.
    const worker = createWorker({
      store,
      workflows: queueHandlers(queueProbe()),
      concurrency: 1,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    const ids: string[] = [];
    try {
      // Started first: a worker registers its queues and grants what they allow (the exclusive path).
      await worker.start();
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ledgerflow.queue_partition WHERE queue = $1 AND partition = '' FOR UPDATE`, [
        concurrencyQueue.name,
      ]);
      for (let i = 0; i < 6; i++) ids.push((await client.start(limited, { id: `fast-${i}`, ms: 1 })).runId);
      await waitUntil('the six runs to complete beside the held counter row', async () => {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE id = ANY(${ids}::uuid[]) AND status = 'completed'`.execute(
          store.db,
        );
        return rows[0]!.n === 6;
      });
      await holder.query('COMMIT');
    } finally {
      await worker.stop();
      await holder.end();
    }
    const { rows } = await sql<{ in_flight: number; slots: number }>`
      SELECT (SELECT in_flight FROM ledgerflow.queue_partition WHERE queue = ${concurrencyQueue.name} AND partition = '') AS in_flight,
             (SELECT count(*)::int FROM ledgerflow.queue_slot WHERE queue = ${concurrencyQueue.name}) AS slots`.execute(
      store.db,
    );
    expect(rows).toEqual([{ in_flight: 0, slots: 0 }]);
  });

  it('counts the slots taken on the fast path once a run joins the line', async () => {
    const client = createClient({ store });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await client.start(limited, { id: `line-${i}`, ms: 1 })).runId);
    const probe = queueProbe();
    // The first two take both slots on the fast path and hold them until the third is in line.
    // Both wait for the same sighting: once one holder lets go, the third is granted and leaves the
    // line, so a second look of its own could wait for a line that has already come and gone.
    let holding = 0;
    let lineSeen: Promise<void> | undefined;
    const seeLine = async (): Promise<void> => {
      await waitUntil('a run in line', async () => {
        const { rows } = await sql<{
          n: number;
        }>`SELECT count(*)::int AS n FROM ledgerflow.queue_waiter WHERE queue = ${concurrencyQueue.name}`.execute(
          store.db,
        );
        return rows[0]!.n === 1;
      });
      const { rows } = await sql<{ in_flight: number }>`
        SELECT in_flight FROM ledgerflow.queue_partition WHERE queue = ${concurrencyQueue.name} AND partition = ''`.execute(
        store.db,
      );
      probe.finished.push({ key: `in_flight=${rows[0]!.in_flight}`, id: '', at: 0 });
    };
    probe.hold = async () => {
      if (++holding > 2) return;
      await (lineSeen ??= seeLine());
    };
    const worker = createWorker({
      store,
      workflows: queueHandlers(probe),
      concurrency: 3,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    try {
      await worker.start();
      await waitUntil('the three runs to complete', async () => {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE id = ANY(${ids}::uuid[]) AND status = 'completed'`.execute(
          store.db,
        );
        return rows[0]!.n === 3;
      });
    } finally {
      await worker.stop();
    }
    // While the third waited, the counter said two slots were held: the two taken on the fast path.
    expect(probe.finished.filter((f) => f.key.startsWith('in_flight=')).map((f) => f.key)).toContain('in_flight=2');
    expect(probe.maxActive.get('limited')).toBe(2);
    const { rows } = await sql<{ in_flight: number; slots: number }>`
      SELECT (SELECT in_flight FROM ledgerflow.queue_partition WHERE queue = ${concurrencyQueue.name} AND partition = '') AS in_flight,
             (SELECT count(*)::int FROM ledgerflow.queue_slot WHERE queue = ${concurrencyQueue.name}) AS slots`.execute(
      store.db,
    );
    expect(rows).toEqual([{ in_flight: 0, slots: 0 }]);
  });
});
