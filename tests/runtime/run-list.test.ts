import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type RunFilter } from '../../runtime/client/client.js';
import { loadRunPage, type RunCursor, type RunListFilter } from '../../runtime/client/run-list.js';
import { main } from '../../runtime/cli/main.js';
import { createDashboard } from '../../runtime/dashboard/dashboard.js';
import type { RunStatus, WorkflowRunRow } from '../../runtime/store/tables.js';
import { DASHBOARD_WORKFLOWS } from '../dashboard/fixtures/dashboard-workflows.js';
import { ORIGIN } from '../dashboard/support/browserless-session.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';

// One run list (runtime/client/run-list.ts) behind both of its callers: `client.listRuns` (so
// `ledgerflow runs`) and the dashboard's runs page. The same filter lists the same runs in the
// same order — newest first, ties on created_at by id descending — whichever reads it.

const PARENT = '00000000-0000-4000-8000-000000000001';

/**
 * 24 runs: created at five instants (up to six runs each, so ties on created_at), three workflows
 * (one in two versions), every status but running, six with dedupe keys (two per workflow), four
 * the children of PARENT.
 */
async function seed(store: TestStore): Promise<void> {
  await migrateForTest(store, DASHBOARD_WORKFLOWS);
  await sql`
    INSERT INTO ledgerflow.workflow_run
           (id, workflow_name, workflow_version, status, input, dedupe_key, created_at, updated_at, finished_at, run_after, waiting_for,
            parent_run_id, parent_step, parent_index)
    SELECT (CASE WHEN g = 1 THEN ${PARENT} ELSE gen_random_uuid()::text END)::uuid,
           w.name, w.version, s.status, jsonb_build_object('g', g),
           CASE WHEN g % 4 = 0 THEN 'key-' || (g / 4 % 2) END,
           timestamptz '2026-01-01T00:00:00Z' + (g / 6) * interval '1 minute', now(),
           CASE WHEN s.status IN ('completed', 'failed', 'cancelled') THEN now() END, now(),
           CASE WHEN s.status = 'waiting' THEN '{"kind":"sleep","step":"price","until":"2100-01-01T00:00:00Z"}'::jsonb END,
           CASE WHEN g BETWEEN 20 AND 23 THEN ${PARENT}::uuid END,
           CASE WHEN g BETWEEN 20 AND 23 THEN 'fan' END,
           CASE WHEN g BETWEEN 20 AND 23 THEN g - 20 END
      FROM generate_series(1, 24) AS g
      CROSS JOIN LATERAL (SELECT CASE g % 3 WHEN 0 THEN 'dash-orders' WHEN 1 THEN 'dash-flaky' ELSE 'dash-receipt' END AS name,
                                 CASE WHEN g % 3 = 0 AND g % 2 = 0 THEN 2 ELSE 1 END AS version) AS w
      CROSS JOIN LATERAL (SELECT (ARRAY['pending', 'waiting', 'completed', 'failed', 'cancelled'])[1 + g % 5] AS status) AS s`.execute(
    store.db,
  );
}

/** The order the list promises, worked out here from the rows themselves. */
function newestFirst(rows: readonly WorkflowRunRow[]): string[] {
  return [...rows]
    .sort((a, b) => b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
    .map((r) => r.id);
}

/** Every page of the dashboard's list for `filter`, `size` runs a page, followed by its cursors. */
async function dashboardIds(store: TestStore, filter: RunListFilter, size: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: RunCursor | undefined;
  do {
    const { page } = await loadRunPage(store.db, filter, cursor, size);
    ids.push(...page.rows.map((r) => r.id));
    cursor = page.next;
  } while (cursor !== undefined);
  return ids;
}

/** The dashboard's filter for a client's. */
function asListFilter(filter: RunFilter): RunListFilter {
  const status = filter.status;
  return {
    statuses: status === undefined ? [] : typeof status === 'string' ? [status] : [...(status as readonly RunStatus[])],
    ...(filter.workflow !== undefined ? { workflow: filter.workflow } : {}),
    ...(filter.parentRunId !== undefined ? { parentRunId: filter.parentRunId } : {}),
    ...(filter.dedupeKey !== undefined ? { dedupeKey: { value: filter.dedupeKey, match: 'exact' as const } } : {}),
  };
}

const FILTERS: readonly RunFilter[] = [
  {},
  { status: 'failed' },
  { status: ['pending', 'waiting', 'cancelled'] },
  { workflow: 'dash-orders' },
  { workflow: 'dash-orders', status: ['completed', 'pending'] },
  { parentRunId: PARENT },
  { parentRunId: PARENT, status: 'waiting' },
  { dedupeKey: 'key-0' },
  { workflow: 'dash-receipt', dedupeKey: 'key-1' },
  { workflow: 'no-such-workflow' },
];

describeStores('the run list of client.listRuns and of the dashboard', (getStore) => {
  let all: WorkflowRunRow[];

  beforeAll(async () => {
    await seed(getStore());
    all = await getStore().db.selectFrom('ledgerflow.workflow_run').selectAll().execute();
    expect(all).toHaveLength(24);
  });

  it('lists the same runs in the same order for every filter, the dashboard page by page', async () => {
    const client = createClient({ store: getStore() });
    for (const filter of FILTERS) {
      const listed = await client.listRuns({ ...filter, limit: 100 });
      const ids = listed.map((r) => r.id);
      const expected = all.filter((r) => matches(r, filter));
      if (filter.dedupeKey === undefined) expect(ids, JSON.stringify(filter)).toEqual(newestFirst(expected));
      else expect(ids, JSON.stringify(filter)).toEqual(expected.map((r) => r.id).sort());
      expect(await dashboardIds(getStore(), asListFilter(filter), 4), JSON.stringify(filter)).toEqual(ids);
    }
    // Non-empty answers, so the comparison above compared something.
    expect((await client.listRuns({ parentRunId: PARENT })).length).toBe(4);
    expect((await client.listRuns({ dedupeKey: 'key-0' })).length).toBeGreaterThan(1);
  });

  it('returns whole rows from listRuns (no cursor column), at most `limit` of them', async () => {
    const client = createClient({ store: getStore() });
    const [first, ...rest] = await client.listRuns({ limit: 5 });
    expect(rest).toHaveLength(4);
    const stored = all.find((r) => r.id === first!.id)!;
    expect(first).toEqual(stored);
    expect(Object.keys(first!)).toEqual(Object.keys(stored));
    expect(first).not.toHaveProperty('created_key');
  });

  it("counts a parent's children per status on the dashboard", async () => {
    const { counts } = await loadRunPage(getStore().db, { statuses: [], parentRunId: PARENT }, undefined, 10);
    const children = all.filter((r) => r.parent_run_id === PARENT);
    for (const status of new Set(children.map((r) => r.status))) {
      expect(counts.get(status), status).toBe(children.filter((r) => r.status === status).length);
    }
    expect([...counts.values()].reduce((a, b) => a + b, 0)).toBe(4);
  });
});

describe('`ledgerflow runs` and the dashboard runs page show the same list [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await seed(store);
  });
  afterAll(() => store.close());

  it('in the same order, filtered alike', async () => {
    for (const [args, query] of [
      [[], ''],
      [['--status', 'failed', '--status', 'pending'], 'status=failed&status=pending'],
      [['--workflow', 'dash-orders'], 'workflow=dash-orders'],
      [['--dedupe-key', 'key-1'], 'key=key-1'],
    ] as const) {
      const out: string[] = [];
      const code = await main(['runs', '--json', '--limit', '100', ...args, '--database-url', store.url!], {
        out: (t) => out.push(t),
        err: () => {},
      });
      expect(code).toBe(0);
      const cli = (JSON.parse(out.join('')) as WorkflowRunRow[]).map((r) => r.id);
      expect(cli.length, args.join(' ')).toBeGreaterThan(0);
      const response = await createDashboard({ store, workflows: DASHBOARD_WORKFLOWS }).fetch(
        new Request(`${ORIGIN}/?limit=100&${query}`),
      );
      expect(response.status).toBe(200);
      const page = [...(await response.text()).matchAll(/<a href="\/runs\/([0-9a-f-]{36})" title=/g)].map((m) => m[1]);
      expect(page, args.join(' ')).toEqual(cli);
    }
  });
});

function matches(run: WorkflowRunRow, filter: RunFilter): boolean {
  const statuses =
    filter.status === undefined ? [] : typeof filter.status === 'string' ? [filter.status] : filter.status;
  return (
    (statuses.length === 0 || statuses.includes(run.status)) &&
    (filter.workflow === undefined || run.workflow_name === filter.workflow) &&
    (filter.parentRunId === undefined || run.parent_run_id === filter.parentRunId) &&
    (filter.dedupeKey === undefined || run.dedupe_key === filter.dedupeKey)
  );
}
