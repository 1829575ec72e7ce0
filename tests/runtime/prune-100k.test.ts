import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '../../dsl/workflow.js';
import { pruneRuns } from '../../runtime/retention/prune.js';
import type { PruneBatch } from '../../runtime/retention/prune-options.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';

const RUNS = 100_000;
const DAY = 86_400_000;
const bulk = workflow('pr-bulk', { version: 1, input: z.object({ n: z.number() }) }).external('charge', {
  output: z.object({}),
  key: ({ input }) => `charge:${input.n}`,
  performTimeoutMs: 1_000,
});

/**
 * Retention at scale, on PostgreSQL: 100 000 runs written in bulk (statuses, ages, an attempt each,
 * a recorded ledger row per completed run, open intents on some failed ones), pruned by one pass.
 * Every run that must stay stays (exact), every batch is bounded; the time is logged, not asserted.
 */
describe('prune 100 000 runs [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [bulk]);
    // i % 10: 0-5 completed, 6 failed, 7 cancelled, 8 pending, 9 waiting; a third finished 10 days ago, the rest 40.
    await sql`
      INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, status, input, dedupe_key, finished_at, waiting_for)
      SELECT md5(i::text)::uuid, 'pr-bulk', 1, s.status, jsonb_build_object('n', i), 'order-' || i,
             CASE WHEN s.status IN ('completed', 'failed', 'cancelled')
                  THEN statement_timestamp() - (CASE WHEN (i / 10) % 3 = 0 THEN 10 ELSE 40 END) * interval '1 day' - i * interval '1 millisecond' END,
             CASE WHEN s.status = 'waiting' THEN '{"kind":"sleep","step":"charge","until":"2100-01-01T00:00:00Z"}'::jsonb END
        FROM generate_series(1, ${RUNS}) AS i,
             LATERAL (SELECT (ARRAY['completed','completed','completed','completed','completed','completed','failed','cancelled','pending','waiting'])[i % 10 + 1] AS status) s`.execute(
      store.db,
    );
    await sql`
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, finished_at)
      SELECT id, 'charge', 1, CASE WHEN status IN ('pending', 'waiting') THEN 'failed' ELSE 'succeeded' END, 1, 'bulk', statement_timestamp()
        FROM ledgerflow.workflow_run`.execute(store.db);
    await sql`
      INSERT INTO ledgerflow.step_effect (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
      SELECT id, 'charge', 'charge:' || (input->>'n'), '{"ok":true}'::jsonb, 'recorded', 'external', 'h', 1, 1, statement_timestamp()
        FROM ledgerflow.workflow_run WHERE status = 'completed'`.execute(store.db);
    // Open intents on every hundredth failed run: those runs must stay.
    await sql`
      INSERT INTO ledgerflow.step_effect (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, reconcile_after)
      SELECT id, 'charge', 'charge:' || (input->>'n'), 'null'::jsonb, 'intent', 'external', 'h', 1, 1, statement_timestamp() + interval '1 hour'
        FROM ledgerflow.workflow_run WHERE status = 'failed' AND (input->>'n')::int % 1000 = 6`.execute(store.db);
    await sql`ANALYZE ledgerflow.workflow_run`.execute(store.db);
    await sql`ANALYZE ledgerflow.step_effect`.execute(store.db);
  }, 120_000);
  afterAll(async () => {
    await store?.close();
  });

  it('prunes in bounded batches and keeps every run that must stay', async () => {
    const { rows: expected } = await sql<{ stay: number; prune: number; effects: number; intents: number }>`
      SELECT count(*) FILTER (WHERE NOT prunable)::int AS stay, count(*) FILTER (WHERE prunable)::int AS prune,
             (SELECT count(*) FROM ledgerflow.step_effect e JOIN ledgerflow.workflow_run r ON r.id = e.workflow_id
               WHERE e.status = 'recorded' AND r.finished_at < statement_timestamp() - interval '30 days')::int AS effects,
             (SELECT count(*) FROM ledgerflow.step_effect WHERE status = 'intent')::int AS intents
        FROM (SELECT r.status IN ('completed', 'failed', 'cancelled') AND r.finished_at < statement_timestamp() - interval '30 days'
                     AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = r.id AND e.status = 'intent') AS prunable
                FROM ledgerflow.workflow_run r) x`.execute(store.db);
    const { stay, prune, effects, intents } = expected[0]!;
    expect(stay + prune).toBe(RUNS);
    expect(intents).toBeGreaterThan(0);
    await sql`CREATE TABLE must_stay AS
                SELECT id FROM ledgerflow.workflow_run r
                 WHERE NOT (r.status IN ('completed', 'failed', 'cancelled') AND r.finished_at < statement_timestamp() - interval '30 days')
                    OR EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = r.id AND e.status = 'intent')`.execute(
      store.db,
    );

    const batches: PruneBatch[] = [];
    const report = await pruneRuns(store.db, {
      olderThanMs: 30 * DAY,
      batchSize: 1_000,
      onBatch: (b) => batches.push(b),
    });
    const slowest = Math.max(...batches.map((b) => b.ms));
    console.log(
      `prune: ${report.runsPruned} of ${RUNS} runs pruned (${report.effectsArchived} effects archived) in ${report.batches} batches, ` +
        `${report.ms} ms (${Math.round(report.runsPruned / (report.ms / 1000))} runs/s, slowest batch ${slowest} ms)`,
    );

    expect(report).toMatchObject({ runsPruned: prune, effectsArchived: effects, stopped: false });
    expect(Math.max(...batches.map((b) => b.runs))).toBeLessThanOrEqual(1_000);
    expect(batches.length).toBeGreaterThanOrEqual(Math.ceil(prune / 1_000));
    const { rows: after } = await sql<{ live: number; missing: number; archived: number; effects: number }>`
      SELECT (SELECT count(*) FROM ledgerflow.workflow_run)::int AS live,
             (SELECT count(*) FROM must_stay m WHERE NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run r WHERE r.id = m.id))::int AS missing,
             (SELECT count(*) FROM ledgerflow.run_archive)::int AS archived,
             (SELECT count(*) FROM ledgerflow.effect_archive)::int AS effects`.execute(store.db);
    expect(after[0]).toEqual({ live: stay, missing: 0, archived: prune, effects });
    // Nothing of a pruned run is left behind in the live tables.
    const { rows: orphans } = await sql<{ n: number }>`
      SELECT (SELECT count(*) FROM ledgerflow.step_attempt a WHERE NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run r WHERE r.id = a.run_id))::int AS n`.execute(
      store.db,
    );
    expect(orphans[0]!.n).toBe(0);
  }, 120_000);
});
