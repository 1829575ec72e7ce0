import { CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimStatement } from '../../runtime/worker/claim.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { twoStepsHandlers } from './fixtures/test-handlers.js';
import { flaky, twoSteps } from './fixtures/test-workflows.js';
import { planNodes, type PlanNode } from '../support/plan-nodes.js';

/**
 * The claim must not read, let alone sort, every due run: with a deep backlog it takes the
 * first `limit` runs in order from the partial indexes. Asserted on the plan PostgreSQL picks
 * for the real claim statement over 50 000 pending runs — plans are data, not timing.
 */
describe('claim plan over a deep backlog [pg]', () => {
  let store: TestStore;
  const registry = buildRegistry([twoStepsHandlers()]);
  const LIMIT = 16;

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [twoSteps, flaky]);
    // 50 000 due runs, half of a workflow this worker does not run; 200 leased, half expired.
    await sql`
      INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, run_after)
      SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN ${twoSteps.name} ELSE ${flaky.name} END, 1,
             jsonb_build_object('n', g), now() - g * interval '1 millisecond'
        FROM generate_series(1, 50000) AS g`.execute(store.db);
    await sql`
      INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, status, lease_owner, lease_expires_at)
      SELECT gen_random_uuid(), ${twoSteps.name}, 1, jsonb_build_object('n', g), 'running', 'elsewhere',
             now() + (g - 100) * interval '1 second'
        FROM generate_series(1, 200) AS g`.execute(store.db);
    // 100 000 sleeping runs (waiting until tomorrow and later): rows, not claim cost.
    await sql`
      INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, status, run_after, waiting_for)
      SELECT gen_random_uuid(), ${twoSteps.name}, 1, jsonb_build_object('n', g), 'waiting',
             now() + interval '1 day' + g * interval '1 second',
             jsonb_build_object('kind', 'sleep', 'step', 'double', 'until', (now() + interval '1 day')::text)
        FROM generate_series(1, 100000) AS g`.execute(store.db);
    await sql`ANALYZE ledgerflow.workflow_run`.execute(store.db);
  }, 120_000);
  afterAll(() => store.close());

  /** EXPLAIN ANALYZE of the claim exactly as the worker sends it, rolled back. */
  const explainClaim = async (): Promise<PlanNode[]> => {
    const compiled = claimStatement(registry, { workerId: 'plan-test', leaseMs: 30_000, limit: LIMIT }).compile(
      store.db,
    );
    return store.db.connection().execute(async (db) => {
      await sql`BEGIN`.execute(db);
      try {
        const { rows } = await db.executeQuery<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
          CompiledQuery.raw(`EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) ${compiled.sql}`, [...compiled.parameters]),
        );
        return planNodes(rows[0]!['QUERY PLAN'][0].Plan);
      } finally {
        await sql`ROLLBACK`.execute(db);
      }
    });
  };

  it('scans workflow_run_leased_idx and workflow_run_due_idx in order, never the table, never a sort of runs', async () => {
    const plan = await explainClaim();
    const runScans = plan.filter((n) => n['Relation Name'] === 'workflow_run');
    const indexScans = runScans.filter((n) => n['Node Type'] === 'Index Scan').map((n) => n['Index Name']);
    expect(indexScans).toContain('workflow_run_leased_idx');
    expect(indexScans).toContain('workflow_run_due_idx');
    expect(runScans.map((n) => n['Node Type'])).not.toContain('Seq Scan');
    expect(runScans.map((n) => n['Node Type'])).not.toContain('Bitmap Heap Scan');
    // A Sort anywhere above a workflow_run scan would mean reading every due run first.
    const sortsOverRuns = plan.filter(
      (n) => n['Node Type'] === 'Sort' && planNodes(n).some((c) => c['Relation Name'] === 'workflow_run'),
    );
    expect(sortsOverRuns).toEqual([]);
  });

  it('reads about as many runs as it claims: the expired leases first, then the oldest due runs', async () => {
    const plan = await explainClaim();
    const scanned = (index: string): number =>
      plan.filter((n) => n['Index Name'] === index).reduce((sum, n) => sum + (n['Actual Rows'] ?? 0), 0);
    // 100 leases expired: the first 16 fill the claim, so the due index is not even read.
    expect(scanned('workflow_run_leased_idx')).toBe(LIMIT);
    expect(scanned('workflow_run_due_idx')).toBe(0);
    const updated = plan.find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'workflow_run');
    expect(updated?.['Actual Rows']).toBe(LIMIT);
  });

  it('with no lease expired, takes due runs from the due index (pending and waiting runs), skipping other workflows as it goes', async () => {
    await sql`UPDATE ledgerflow.workflow_run SET lease_expires_at = now() + interval '1 hour' WHERE status = 'running'`.execute(
      store.db,
    );
    const plan = await explainClaim();
    const pending = plan.filter((n) => n['Index Name'] === 'workflow_run_due_idx');
    // Every second due run belongs to the other workflow: about 2 × limit rows, not 50 000.
    const read = pending.reduce((sum, n) => sum + (n['Actual Rows'] ?? 0), 0);
    expect(read).toBeGreaterThanOrEqual(LIMIT);
    expect(read).toBeLessThanOrEqual(2 * LIMIT + 1);
  });

  it('with nothing due, reads no sleeping run: the due index scan stops at the first future run_after', async () => {
    await sql`UPDATE ledgerflow.workflow_run SET run_after = now() + interval '1 hour' WHERE status = 'pending'`.execute(
      store.db,
    );
    const plan = await explainClaim();
    const due = plan.filter((n) => n['Index Name'] === 'workflow_run_due_idx');
    expect(due.length).toBeGreaterThan(0);
    expect(due.reduce((sum, n) => sum + (n['Actual Rows'] ?? 0), 0)).toBe(0);
    const updated = plan.find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'workflow_run');
    expect(updated?.['Actual Rows']).toBe(0);
  });
});
