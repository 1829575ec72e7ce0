import { sql } from 'kysely';
import { shapeHash } from 'ledgerflow/dsl';
import { bindHandlers } from 'ledgerflow/runtime';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { claimRuns } from '../../runtime/worker/claim.js';
import { advanceRunStatement } from '../../runtime/worker/step-commits.js';
import type { AdvanceParams } from '../../runtime/worker/result-commit.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { planNodes, type PlanNode } from '../support/plan-nodes.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { reserve } from './fixtures/test-workflows.js';
import { startTestRun } from './fixtures/run-helpers.js';

/**
 * The plan a worker's connection keeps for a one-run commit. A named statement is planned with
 * its values for five executions, then PostgreSQL may switch to a generic plan — made without the
 * values, by the estimates of the moment — and keep it for the connection's life. The commit's
 * rows are a CTE `input`; one run's is NOT MATERIALIZED so that its parameters are pulled up into
 * the writes and the run, its attempt and its ledger row are found by key. Materialized, the
 * generic plan joined a one-row CTE scan to the tables by their estimates: on a young database,
 * a Seq Scan of `step_effect` for the step's ledger row, cached while the ledger grew. Plans,
 * not timings: the generic plan of the real statement, forced (`plan_cache_mode`).
 */
type Node = PlanNode & { readonly 'CTE Name'?: string; readonly 'Index Cond'?: string; readonly Filter?: string };

describe('a one-run commit in its generic plan [pg]', () => {
  let store: TestStore;
  const registry = buildRegistry([
    bindHandlers(reserve, { reserve: async (ctx) => ctx.record({ reservationId: 1 }) }, shapeHash(reserve)),
  ]);

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [reserve]);
    // Some history, so that the tables are not empty when the plan is made.
    for (let i = 0; i < 20; i += 1) await startTestRun(store, reserve, { orderId: `plan-${i}`, quantity: 1 });
  }, 120_000);
  afterAll(() => store?.close());

  it('reaches the run, its attempt and its ledger row through the parameters, with no scan of a table or of `input`', async () => {
    const plan = await store.db.connection().execute(async (db) => {
      await sql`BEGIN`.execute(db);
      try {
        const [held] = await claimRuns(db, registry, { workerId: 'plan', leaseMs: 30_000, limit: 1 });
        if (held === undefined) throw new Error('nothing to claim');
        const params: AdvanceParams = {
          lease: { runId: held.id, fencingToken: held.fencingToken, workerId: 'plan', leaseMs: 30_000 },
          workflowName: reserve.name,
          workflowVersion: reserve.version,
          step: reserve.steps[0]!,
          attempt: held.attempt!,
          resultAttempt: held.attempt!,
          output: { reservationId: 1 },
          effect: { key: `reserve:${held.id}`, mode: 'insert-recorded', attempt: held.attempt!, requestHash: 'h' },
          continuation: { kind: 'complete', runOutput: { reserve: { reservationId: 1 } } },
        };
        const compiled = advanceRunStatement(params).compile(db);
        await sql`SET LOCAL plan_cache_mode = force_generic_plan`.execute(db);
        await sql`PREPARE lf_commit_plan AS ${sql.raw(compiled.sql)}`.execute(db);
        const values = compiled.parameters.map((v) =>
          v === null || v === undefined ? 'NULL' : pg.Client.prototype.escapeLiteral(String(v)),
        );
        const { rows } = await sql<{
          'QUERY PLAN': [{ Plan: Node }];
        }>`EXPLAIN (FORMAT JSON) EXECUTE lf_commit_plan(${sql.raw(values.join(', '))})`.execute(db);
        return planNodes(rows[0]!['QUERY PLAN'][0].Plan) as Node[];
      } finally {
        await sql`ROLLBACK`.execute(db);
      }
    });
    const scans = plan.filter((n) => n['Node Type'] === 'Seq Scan').map((n) => n['Relation Name']);
    expect(scans, JSON.stringify(plan.map((n) => [n['Node Type'], n['Relation Name'] ?? n['CTE Name']]))).toEqual([]);
    expect(plan.filter((n) => n['Node Type'] === 'CTE Scan' && n['CTE Name'] === 'input')).toEqual([]);
    // The ledger row is looked up by the run's id, a parameter.
    const ledger = plan.filter((n) => n['Relation Name'] === 'step_effect' && n['Node Type'] !== 'ModifyTable');
    expect(ledger.length).toBeGreaterThan(0);
    for (const n of ledger) expect(`${n['Index Cond'] ?? ''} ${n.Filter ?? ''}`).toMatch(/workflow_id = \$\d+/);
  });
});
