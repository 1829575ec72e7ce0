import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { QUEUE_WORKFLOWS, rated } from './fixtures/queue-workflows.js';
import { registerQueueStatement } from '../../runtime/worker/queue-slots.js';
import { QUEUE_NO_PARTITION } from '../../runtime/store/queue-partition.js';

/**
 * A rate limit holds in real time (issue 24, item 5): a grant that waited for the queue's lock is
 * dated when it got the lock, not when its statement began, so its row does not leave the sliding
 * window early. A second connection holds the queue's counter row (`FOR UPDATE`, as a concurrent
 * grant, pause or release does) while a grant waits behind it; the instant the lock is released
 * is read on the database clock, so nothing here depends on how fast the machine is.
 */
describe('queue rate windows on the database clock [pg]', () => {
  const queue = { name: 'wt-q-one-per-second', limits: { rateLimit: { limit: 1, periodMs: 1_000 } } };
  const W1 = '00000000-0000-4000-8000-00000000c001';
  const W2 = '00000000-0000-4000-8000-00000000c002';
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, QUEUE_WORKFLOWS);
    await registerQueueStatement(queue).execute(store.db);
    // Two runs in line for the queue, W1 first.
    await sql`
      INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, status, run_after, waiting_for)
      SELECT id::uuid, ${rated.name}, ${rated.version}, '{}'::jsonb, 'waiting', 'infinity',
             jsonb_build_object('kind', 'queue', 'step', 'call', 'queue', ${queue.name}::text, 'partition', ${QUEUE_NO_PARTITION}::text, 'until', null)
        FROM unnest(ARRAY[${W1}, ${W2}]) AS id`.execute(store.db);
    await sql`INSERT INTO ledgerflow.queue_partition (queue, partition, waiting, top_priority) VALUES (${queue.name}, ${QUEUE_NO_PARTITION}, 2, 0)`.execute(
      store.db,
    );
    await sql`
      INSERT INTO ledgerflow.queue_waiter (queue, partition, run_id, step_name, priority, enqueued_at)
      VALUES (${queue.name}, ${QUEUE_NO_PARTITION}, ${W1}, 'call', 0, statement_timestamp() - interval '2 seconds'),
             (${queue.name}, ${QUEUE_NO_PARTITION}, ${W2}, 'call', 0, statement_timestamp() - interval '1 second')`.execute(
      store.db,
    );
  }, 120_000);
  afterAll(() => store.close());

  it('dates a grant that waited for the queue lock after the lock, and grants no second one within the window of the first', async () => {
    const holder = new pg.Client({ connectionString: store.url });
    const granter = new pg.Client({ connectionString: store.url });
    await holder.connect();
    await granter.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ledgerflow.queue_partition WHERE queue = $1 AND partition = '' FOR UPDATE`, [
        queue.name,
      ]);
      const granterPid = (await granter.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const first = granter.query<{ granted: number }>('SELECT ledgerflow.queue_grant($1) AS granted', [queue.name]);
      // The grant's statement has begun and waits for the lock.
      for (;;) {
        const { rows } = await holder.query('SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted', [granterPid]);
        if (rows.length > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // Held longer than the window: a grant dated when its statement began would leave the window
      // as soon as it is made, and let the next one in at once.
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      const released = (await holder.query<{ at: string }>('SELECT clock_timestamp()::text AS at')).rows[0]!.at;
      await holder.query('COMMIT');
      expect((await first).rows[0]!.granted).toBe(1);
      // The next grant, right after (W2 is in line): the window of the first is on the clock of the lock.
      await sql`SELECT ledgerflow.queue_grant(${queue.name})`.execute(store.db);

      const { rows } = await sql<{ run_id: string; after_release: boolean; window_after_release: boolean }>`
        SELECT run_id, granted_at >= ${released}::timestamptz AS after_release,
               granted_at >= ${released}::timestamptz + interval '1 second' AS window_after_release
          FROM ledgerflow.queue_slot WHERE queue = ${queue.name} ORDER BY granted_at, run_id`.execute(store.db);
      // W1 was granted once the lock was released, and dated so.
      expect(rows[0]).toMatchObject({ run_id: W1, after_release: true });
      // W2, if granted at all, came a full window after W1 could have been granted (the lock's release).
      for (const row of rows.slice(1)) expect(row).toMatchObject({ run_id: W2, window_after_release: true });
      // The window itself: the grants the queue recorded are a full period apart.
      const { rows: gaps } = await sql<{ close: number }>`
        SELECT count(*)::int AS close FROM ledgerflow.queue_grant a JOIN ledgerflow.queue_grant b
            ON a.queue = b.queue AND a.partition = b.partition AND a.ctid <> b.ctid
         WHERE a.queue = ${queue.name} AND b.granted_at >= a.granted_at AND b.granted_at < a.granted_at + interval '1 second'`.execute(
        store.db,
      );
      expect(gaps).toEqual([{ close: 0 }]);
    } finally {
      await holder.end();
      await granter.end();
    }
  });
});
