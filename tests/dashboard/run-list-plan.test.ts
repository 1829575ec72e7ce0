import { CompiledQuery, sql, type RawBuilder } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openIntentsQuery } from '../../runtime/dashboard/open-intents.js';
import {
  runPageQuery,
  STATUS_COUNT_CAP,
  statusCountsQuery,
  workflowVersions,
  type RunCursor,
  type RunListFilter,
} from '../../runtime/client/run-list.js';
import { RUN_STATUSES } from '../../runtime/store/tables.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { DASHBOARD_WORKFLOWS } from './fixtures/dashboard-workflows.js';
import { planNodes, type PlanNode } from '../support/plan-nodes.js';

/**
 * The dashboard's lists must cost a page, not the table: over 1 000 000 runs (and 5 000 open
 * intents among 200 000 ledger rows), every list query the dashboard sends is checked with
 * EXPLAIN (ANALYZE, FORMAT JSON): index scans only on workflow_run (no Seq Scan, no Bitmap Heap
 * Scan), no Sort over runs, and a bounded number of index entries read. Plans, not timings.
 */
/** Is there a scan of `relation` under `node` with no Limit between them? */
function unlimitedScanBelow(node: PlanNode, relation: string): boolean {
  return (node.Plans ?? []).some(
    (child) =>
      child['Node Type'] !== 'Limit' && (child['Relation Name'] === relation || unlimitedScanBelow(child, relation)),
  );
}

const RUNS = 1_000_000;
const PAGE = 50;

describe('dashboard list plans over 1 000 000 runs [pg]', () => {
  let store: TestStore;

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, DASHBOARD_WORKFLOWS);
    // One run every 2 s back from now (about 23 days): four workflows (dash-orders in two
    // versions), 80 % completed, 12 % failed, 4 % cancelled, 2 % pending, 2 % waiting, and
    // 100 runs needing reconciliation — a rare status must cost as little as a common one.
    // Every other run has a dedupe key order-<n>.
    await sql`
      INSERT INTO ledgerflow.workflow_run
             (id, workflow_name, workflow_version, status, input, dedupe_key, created_at, updated_at, finished_at, run_after, waiting_for)
      SELECT gen_random_uuid(), w.name, w.version, s.status, '{}'::jsonb,
             CASE WHEN g % 2 = 0 THEN 'order-' || g END,
             now() - g * interval '2 seconds', now(),
             CASE WHEN s.status IN ('completed', 'failed', 'cancelled') THEN now() END,
             CASE WHEN s.status = 'waiting' THEN 'infinity'::timestamptz ELSE now() END,
             CASE WHEN s.status = 'waiting' THEN '{"kind":"sleep","step":"price","until":"2100-01-01T00:00:00Z"}'::jsonb END
        FROM generate_series(1, ${RUNS}) AS g
        CROSS JOIN LATERAL (SELECT CASE g % 4 WHEN 0 THEN 'dash-orders' WHEN 1 THEN 'dash-orders' WHEN 2 THEN 'dash-flaky' ELSE 'dash-receipt' END AS name,
                                   CASE g % 4 WHEN 1 THEN 2 ELSE 1 END AS version) AS w
        CROSS JOIN LATERAL (SELECT CASE WHEN g % 10000 = 5 THEN 'needs_reconciliation'
                                        WHEN g % 100 < 80 THEN 'completed' WHEN g % 100 < 92 THEN 'failed'
                                        WHEN g % 100 < 96 THEN 'cancelled' WHEN g % 100 < 98 THEN 'pending' ELSE 'waiting' END AS status) AS s`.execute(
      store.db,
    );
    // The ledger: 200 000 recorded rows and 5 000 open intents (on the first runs by id order).
    await sql`
      INSERT INTO ledgerflow.step_effect
             (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, intent_at, recorded_at, reconcile_after)
      SELECT r.id, 'charge', 'charge:' || r.id, '{}'::jsonb, CASE WHEN r.n <= 5000 THEN 'intent' ELSE 'recorded' END, 'external', 'h', 1, 1,
             now() - r.n * interval '1 second', CASE WHEN r.n > 5000 THEN now() END, CASE WHEN r.n <= 5000 THEN now() + interval '1 minute' END
        FROM (SELECT id, row_number() OVER () AS n FROM ledgerflow.workflow_run LIMIT 205000) AS r`.execute(store.db);
    await sql`VACUUM (ANALYZE) ledgerflow.workflow_run`.execute(store.db);
    await sql`VACUUM (ANALYZE) ledgerflow.step_effect`.execute(store.db);
  }, 600_000);
  afterAll(() => store.close());

  /** EXPLAIN ANALYZE of a query exactly as the dashboard sends it. */
  const explain = async (query: RawBuilder<unknown> | CompiledQuery): Promise<PlanNode[]> => {
    const compiled = 'sql' in query ? query : query.compile(store.db);
    const { rows } = await store.db.executeQuery<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      CompiledQuery.raw(`EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) ${compiled.sql}`, [...compiled.parameters]),
    );
    return planNodes(rows[0]!['QUERY PLAN'][0].Plan);
  };

  /** Index entries a plan read from `relation`: rows its scans returned (per loop) plus rows their filters dropped. */
  const entriesRead = (plan: readonly PlanNode[], relation: string): number =>
    plan
      .filter((n) => n['Relation Name'] === relation)
      .reduce(
        (sum, n) =>
          sum +
          (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1) +
          (n['Rows Removed by Filter'] ?? 0) +
          (n['Rows Removed by Index Recheck'] ?? 0),
        0,
      );

  const expectIndexRangesOnly = (plan: readonly PlanNode[], relation: string): void => {
    const scans = plan.filter((n) => n['Relation Name'] === relation);
    expect(scans.length, `some scan of ${relation}`).toBeGreaterThan(0);
    for (const scan of scans)
      expect(['Index Scan', 'Index Only Scan'], `${relation} read by ${scan['Node Type']}`).toContain(
        scan['Node Type'],
      );
    // A sort may order the few rows of limited ranges, never a scan that no Limit stops.
    const sorts = plan.filter(
      (n) => (n['Node Type'] === 'Sort' || n['Node Type'] === 'Incremental Sort') && unlimitedScanBelow(n, relation),
    );
    expect(sorts, `a sort over every matching row of ${relation}`).toEqual([]);
  };

  const listCases: ReadonlyArray<readonly [string, RunListFilter]> = [
    ['no filter', { statuses: [] }],
    ['a common status', { statuses: ['completed'] }],
    ['a rare status', { statuses: ['needs_reconciliation'] }],
    ['two statuses', { statuses: ['failed', 'cancelled'] }],
    ['a workflow (two versions)', { statuses: [], workflow: 'dash-orders' }],
    ['a workflow, version and status', { statuses: ['failed'], workflow: 'dash-orders', version: 2 }],
    [
      'a time range',
      {
        statuses: [],
        createdFrom: new Date(Date.now() - 10 * 86_400_000),
        createdBefore: new Date(Date.now() - 9 * 86_400_000),
      },
    ],
    [
      'a workflow and a time range',
      { statuses: ['completed'], workflow: 'dash-flaky', createdFrom: new Date(Date.now() - 5 * 86_400_000) },
    ],
  ];

  for (const [what, filter] of listCases) {
    it(`lists a page by ${what}: one index range per status (and version), at most a page from each`, async () => {
      const versions =
        filter.workflow !== undefined && filter.version === undefined
          ? await workflowVersions(store.db, filter.workflow)
          : [];
      const first = await runPageQuery(filter, undefined, PAGE, versions).execute(store.db);
      expect(first.rows).toHaveLength(PAGE + 1);
      const last = first.rows[PAGE - 1]!;
      const cursor: RunCursor = { by: 'created', createdAt: last.created_key, id: last.id };
      for (const c of [undefined, cursor]) {
        const plan = await explain(runPageQuery(filter, c, PAGE, versions));
        expectIndexRangesOnly(plan, 'workflow_run');
        const ranges =
          (filter.statuses.length || RUN_STATUSES.length) *
          (filter.workflow === undefined ? 1 : Math.max(1, versions.length));
        // Each range stops after a page. (Merged by Merge Append, the usual plan, it reads about a
        // page plus a row per range; merged by Append and a top-N sort, at most a page per range.)
        expect(entriesRead(plan, 'workflow_run'), 'index entries read').toBeLessThanOrEqual((PAGE + 1) * ranges);
      }
      // The second page goes on exactly where the first stopped: newest first, no run twice.
      const second = await runPageQuery(filter, cursor, PAGE, versions).execute(store.db);
      expect(second.rows[0]!.id).toBe(first.rows[PAGE]!.id);
      const keys = [...first.rows.slice(0, PAGE), ...second.rows].map((r) => `${r.created_key} ${r.id}`);
      expect(keys).toEqual([...keys].sort().reverse());
    });
  }

  it('searches a dedupe key by prefix in key order, reading one index range', async () => {
    const filter: RunListFilter = { statuses: [], dedupeKey: { value: 'order-12', match: 'prefix' } };
    const first = await runPageQuery(filter, undefined, PAGE).execute(store.db);
    expect(first.rows).toHaveLength(PAGE + 1);
    expect(first.rows.every((r) => r.dedupe_key!.startsWith('order-12'))).toBe(true);
    const last = first.rows[PAGE - 1]!;
    for (const cursor of [undefined, { by: 'key', dedupeKey: last.dedupe_key!, id: last.id } as const]) {
      const plan = await explain(runPageQuery(filter, cursor, PAGE));
      expectIndexRangesOnly(plan, 'workflow_run');
      expect(plan.filter((n) => n['Relation Name'] === 'workflow_run').map((n) => n['Index Name'])).toEqual([
        'workflow_run_dedupe_prefix_idx',
      ]);
      expect(entriesRead(plan, 'workflow_run')).toBeLessThanOrEqual(PAGE + 1);
    }
    const exact = await runPageQuery(
      { statuses: [], dedupeKey: { value: 'order-500000', match: 'exact' } },
      undefined,
      PAGE,
    ).execute(store.db);
    expect(exact.rows.map((r) => r.dedupe_key)).toEqual(['order-500000']);
    const exactPlan = await explain(
      runPageQuery({ statuses: [], dedupeKey: { value: 'order-500000', match: 'exact' } }, undefined, PAGE),
    );
    expectIndexRangesOnly(exactPlan, 'workflow_run');
    expect(entriesRead(exactPlan, 'workflow_run')).toBeLessThanOrEqual(1);
    // `ledgerflow runs --dedupe-key` (client.listRuns: whole rows) without a workflow reads the same index.
    const listed = runPageQuery(
      { statuses: [], dedupeKey: { value: 'order-500000', match: 'exact' } },
      undefined,
      PAGE,
      [],
      'all',
    );
    expect((await listed.execute(store.db)).rows.map((r) => r.dedupe_key)).toEqual(['order-500000']);
    const listedPlan = await explain(listed);
    expect(listedPlan.filter((n) => n['Relation Name'] === 'workflow_run').map((n) => n['Index Name'])).toEqual([
      'workflow_run_dedupe_prefix_idx',
    ]);
    expect(entriesRead(listedPlan, 'workflow_run')).toBeLessThanOrEqual(1);
  });

  it('counts runs per status from the index, each count stopping at the cap', async () => {
    for (const filter of [{ statuses: [] }, { statuses: [], workflow: 'dash-orders' }] satisfies RunListFilter[]) {
      const versions = filter.workflow !== undefined ? await workflowVersions(store.db, filter.workflow) : [];
      const { rows } = await statusCountsQuery(filter, versions).execute(store.db);
      const counts = new Map(rows.map((r) => [r.status, r.count]));
      expect(counts.get('completed')).toBe(STATUS_COUNT_CAP + 1);
      expect(counts.get('needs_reconciliation')).toBe(100);
      expect(counts.get('running')).toBe(0);
      const plan = await explain(statusCountsQuery(filter, versions));
      const scans = plan.filter((n) => n['Relation Name'] === 'workflow_run').map((n) => n['Node Type']);
      expect(scans).toContain('Index Only Scan');
      // A status with few runs may be counted through a bitmap of the same index; never the table.
      expect(scans).not.toContain('Seq Scan');
      expect(entriesRead(plan, 'workflow_run')).toBeLessThanOrEqual(RUN_STATUSES.length * (STATUS_COUNT_CAP + 1));
    }
  });

  it('pages open intents oldest first from their partial index, never the whole ledger', async () => {
    const first = await openIntentsQuery(undefined, PAGE).execute(store.db);
    expect(first.rows).toHaveLength(PAGE + 1);
    const ages = first.rows.map((r) => r.intent_at.getTime());
    expect(ages).toEqual([...ages].sort((a, b) => a - b));
    const last = first.rows[PAGE - 1]!;
    const cursor = {
      intentAt: last.intent_key,
      runId: last.run_id,
      stepName: last.step_name,
      key: last.idempotency_key,
    };
    for (const c of [undefined, cursor]) {
      const plan = await explain(openIntentsQuery(c, PAGE));
      expectIndexRangesOnly(plan, 'step_effect');
      expect(plan.filter((n) => n['Relation Name'] === 'step_effect').map((n) => n['Index Name'])).toEqual([
        'step_effect_open_intent_age_idx',
      ]);
      expect(entriesRead(plan, 'step_effect')).toBeLessThanOrEqual(PAGE + 1);
      // The run of each intent by its primary key: a page of lookups.
      expectIndexRangesOnly(plan, 'workflow_run');
      expect(entriesRead(plan, 'workflow_run')).toBeLessThanOrEqual(PAGE + 1);
    }
    const second = await openIntentsQuery(cursor, PAGE).execute(store.db);
    expect(second.rows[0]!.idempotency_key).toBe(first.rows[PAGE]!.idempotency_key);
  });
});
