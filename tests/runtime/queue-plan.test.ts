import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { fair, QUEUE_WORKFLOWS } from './fixtures/queue-workflows.js';
import { registerQueueStatement } from '../../runtime/worker/queue-slots.js';

/**
 * A grant must not read every waiter: with 100 000 runs waiting across 1 000 partitions, one
 * `queue_grant` call finds the next partition in turn and its best waiter through indexes. Checked
 * with PostgreSQL's own table statistics (flushed with pg_stat_force_next_flush): no sequential
 * scan of the queue tables, and a handful of index tuples — not timing.
 */
describe('queue grant cost over a deep, wide backlog [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, QUEUE_WORKFLOWS);
    await registerQueueStatement({ name: 'wt-q-fair', limits: { concurrency: 1 } }).execute(store.db);
    await sql`
      INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, status, run_after, waiting_for)
      SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, ${fair.name}, ${fair.version}, '{}'::jsonb, 'waiting', 'infinity',
             jsonb_build_object('kind', 'queue', 'step', 'work', 'queue', 'wt-q-fair', 'partition', 'tenant-' || (g % 1000), 'until', null)
        FROM generate_series(1, 100000) AS g`.execute(store.db);
    await sql`
      INSERT INTO ledgerflow.queue_partition (queue, partition, waiting, top_priority)
      SELECT 'wt-q-fair', 'tenant-' || t, 100, 0 FROM generate_series(0, 999) AS t`.execute(store.db);
    await sql`
      INSERT INTO ledgerflow.queue_waiter (queue, partition, run_id, step_name, priority, enqueued_at)
      SELECT 'wt-q-fair', 'tenant-' || (g % 1000), ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, 'work', 0,
             now() - interval '1 hour' + g * interval '1 millisecond'
        FROM generate_series(1, 100000) AS g`.execute(store.db);
    await sql`ANALYZE ledgerflow.queue_waiter`.execute(store.db);
    await sql`ANALYZE ledgerflow.queue_partition`.execute(store.db);
  }, 120_000);
  afterAll(() => store.close());

  it('grants through indexes only: no sequential scan, a few index tuples', async () => {
    const stats = async () => {
      await sql`SELECT pg_stat_force_next_flush()`.execute(store.db);
      const { rows } = await sql<{ relname: string; seq_scan: number; idx_tup_fetch: number }>`
        SELECT relname, seq_scan::int, coalesce(idx_tup_fetch, 0)::int AS idx_tup_fetch FROM pg_stat_user_tables
         WHERE schemaname = 'ledgerflow' AND relname IN ('queue_waiter', 'queue_partition') ORDER BY relname`.execute(
        store.db,
      );
      return Object.fromEntries(rows.map((r) => [r.relname, r]));
    };
    const before = await stats();
    const { rows } = await sql<{ granted: number }>`SELECT ledgerflow.queue_grant('wt-q-fair') AS granted`.execute(
      store.db,
    );
    const after = await stats();
    expect(rows[0]!.granted).toBe(1);
    for (const table of ['queue_waiter', 'queue_partition']) {
      expect(after[table]!.seq_scan - before[table]!.seq_scan, `${table} seq scans`).toBe(0);
      expect(after[table]!.idx_tup_fetch - before[table]!.idx_tup_fetch, `${table} index tuples fetched`).toBeLessThan(
        20,
      );
    }
    // The tenant whose turn it was is the one served longest ago (never: NULLS FIRST), its oldest waiter.
    const { rows: slot } = await sql<{
      partition: string;
      run_id: string;
    }>`SELECT partition, run_id FROM ledgerflow.queue_slot`.execute(store.db);
    expect(slot).toHaveLength(1);
  });
});
