import { CompiledQuery, sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LedgerflowDatabase } from '../../runtime/store/tables.js';
import { claimRuns, claimStatement } from '../../runtime/worker/claim.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { advanceRunStatement } from '../../runtime/worker/step-commits.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { planNodes, type PlanNode } from '../support/plan-nodes.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { twoSteps } from './fixtures/test-workflows.js';
import { poison, poisonHandlers } from './fixtures/poison-workflows.js';
import { fillScaleBacklog, notDueCount } from '../support/scale-backlog.js';

/**
 * Claim cost must not grow with the backlog. The same claim statements the worker sends — the
 * standalone claim (takeovers, then due runs) and the claim fused into a completion commit — are
 * EXPLAIN ANALYZEd over 1 000 and then 1 000 000 unfinished runs (tests/support/scale-backlog.ts:
 * due runs of this worker's workflow and of one it does not run, runs not due yet, runs leased
 * to a live worker, sleeping runs and runs queued for a slot): the runs read and the buffers
 * touched must stay within a small factor, with no Seq Scan and no Sort of runs. Plans, not
 * timings. (Queued runs have no path of their own: a run waiting for a slot is `waiting` with
 * run_after = 'infinity', so the due index skips it like any run that is not due.)
 */
describe('claim plans from 1 000 to 1 000 000 unfinished runs [pg]', () => {
  let store: TestStore;
  const registry = buildRegistry([poisonHandlers('scale')]);
  const LIMIT = 16;
  const CANDIDATE_INDEXES = ['workflow_run_due_idx', 'workflow_run_leased_idx'];
  const options = { workerId: 'scale-plan', leaseMs: 30_000, limit: LIMIT };

  interface Measured {
    /** Entries read from each workflow_run index (rows returned, per loop, plus rows filtered out). */
    readonly runsRead: Record<string, number>;
    /** Of those, from the two indexes candidates come from (workflow_run_due_idx, workflow_run_leased_idx). */
    readonly candidatesRead: number;
    /** Shared buffers (hit + read) the candidate index scans touched. */
    readonly candidateBuffers: number;
    /** Shared buffers the whole statement touched (16 runs updated, 16 attempts opened included). */
    readonly totalBuffers: number;
    readonly claimed: number;
    readonly plan: PlanNode[];
  }
  const at: Record<'small' | 'large', { standalone?: Measured; fused?: Measured }> = { small: {}, large: {} };

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [poison, twoSteps]);
  }, 120_000);
  afterAll(() => store?.close());

  /** EXPLAIN (ANALYZE, BUFFERS) of a statement built in a transaction that is rolled back afterwards. */
  const explain = async (build: (db: Kysely<LedgerflowDatabase>) => Promise<CompiledQuery>): Promise<Measured> =>
    store.db.connection().execute(async (db) => {
      await sql`BEGIN`.execute(db);
      try {
        const compiled = await build(db);
        const { rows } = await db.executeQuery<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
          CompiledQuery.raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON, TIMING OFF) ${compiled.sql}`, [
            ...compiled.parameters,
          ]),
        );
        const root = rows[0]!['QUERY PLAN'][0].Plan;
        const plan = planNodes(root);
        const runScans = plan.filter((n) => n['Relation Name'] === 'workflow_run' && n['Node Type'] !== 'ModifyTable');
        const read = (n: PlanNode): number =>
          (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1) + (n['Rows Removed by Filter'] ?? 0);
        const buffers = (n: PlanNode): number => (n['Shared Hit Blocks'] ?? 0) + (n['Shared Read Blocks'] ?? 0);
        const runsRead: Record<string, number> = {};
        for (const n of runScans) {
          const key = n['Index Name'] ?? n['Node Type'];
          runsRead[key] = (runsRead[key] ?? 0) + read(n);
        }
        const candidateScans = runScans.filter((n) => CANDIDATE_INDEXES.includes(n['Index Name'] ?? ''));
        // The claim's UPDATE (a fused plan also has the completing run's, of one row).
        const updates = plan.filter(
          (n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'workflow_run' && n.Operation === 'Update',
        );
        return {
          runsRead,
          candidatesRead: candidateScans.reduce((sum, n) => sum + read(n), 0),
          candidateBuffers: candidateScans.reduce((sum, n) => sum + buffers(n), 0),
          totalBuffers: buffers(root),
          claimed: Math.max(0, ...updates.map((n) => n['Actual Rows'] ?? 0)),
          plan,
        };
      } finally {
        await sql`ROLLBACK`.execute(db);
      }
    });

  const standalone = () => explain(async (db) => claimStatement(registry, options).compile(db));

  /** A run claimed (in the rolled-back transaction), then its one step completed with a fused claim of 16 more. */
  const fused = () =>
    explain(async (db) => {
      const [held] = await claimRuns(db, registry, { ...options, limit: 1 });
      if (held === undefined) throw new Error('nothing to claim for the fused-claim plan');
      return advanceRunStatement({
        lease: {
          runId: held.id,
          fencingToken: held.fencingToken,
          workerId: options.workerId,
          leaseMs: options.leaseMs,
        },
        workflowName: poison.name,
        workflowVersion: poison.version,
        step: poison.steps[0]!,
        attempt: held.attempt!,
        resultAttempt: held.attempt!,
        output: { survivedBy: 'scale' },
        continuation: {
          kind: 'complete',
          runOutput: { explode: { survivedBy: 'scale' } },
          claimNext: { registry, options },
        },
      }).compile(db);
    });

  /** What holds at every size: candidates come from the indexes in order, about `limit` of them, never sorted. */
  const expectCandidatesByIndex = (m: Measured) => {
    const runScans = m.plan.filter((n) => n['Relation Name'] === 'workflow_run');
    expect(runScans.map((n) => n['Node Type'])).not.toContain('Bitmap Heap Scan');
    const sortsOverRuns = m.plan.filter(
      (n) => n['Node Type'] === 'Sort' && planNodes(n).some((c) => c['Relation Name'] === 'workflow_run'),
    );
    expect(sortsOverRuns).toEqual([]);
    expect(m.claimed).toBe(LIMIT);
    // Due runs of the other workflow are read past (2 of theirs to 3 of ours): about 16 × 5/3.
    expect(m.runsRead['workflow_run_due_idx'], JSON.stringify(m.runsRead)).toBeGreaterThanOrEqual(LIMIT);
    expect(m.candidatesRead, JSON.stringify(m.runsRead)).toBeLessThanOrEqual(3 * LIMIT);
  };
  const summary = (m: Measured) => ({ ...m, plan: undefined });

  it('over 1 000 unfinished runs, both claims take about `limit` due runs from the due index', async () => {
    expect(await fillScaleBacklog(store.db, { from: 0, to: 1_000, registered: poison, other: twoSteps })).toBe(1_000);
    at.small.standalone = await standalone();
    at.small.fused = await fused();
    expectCandidatesByIndex(at.small.standalone);
    expectCandidatesByIndex(at.small.fused);
  });

  it('over 1 000 000, they read as many runs and about as many buffers as over 1 000, and no table scan', async () => {
    expect(await fillScaleBacklog(store.db, { from: 1_000, to: 1_000_000, registered: poison, other: twoSteps })).toBe(
      999_000,
    );
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM ledgerflow.workflow_run
       WHERE status IN ('pending', 'waiting') AND run_after > statement_timestamp()`.execute(store.db);
    // Not due (later, sleeping, queued): skipped by the index range, never filtered row by row.
    expect(rows[0]!.n).toBe(notDueCount(1_000_000));
    at.large.standalone = await standalone();
    at.large.fused = await fused();
    for (const kind of ['standalone', 'fused'] as const) {
      const small = at.small[kind]!;
      const large = at.large[kind]!;
      const report = `${kind}: ${JSON.stringify({ small: summary(small), large: summary(large) })}`;
      console.log(`[claim-scale-plan] ${report}`);
      expectCandidatesByIndex(large);
      // Over a small table PostgreSQL may join the 16 candidates to workflow_run by hashing a Seq
      // Scan of it (cheaper than 16 lookups by its estimate); over a large one, never.
      expect(
        large.plan.filter((n) => n['Relation Name'] === 'workflow_run').map((n) => n['Node Type']),
        report,
      ).not.toContain('Seq Scan');
      const allRead = Object.values(large.runsRead).reduce((a, b) => a + b, 0);
      expect(allRead, report).toBeLessThanOrEqual(5 * LIMIT);
      // The same mix of due runs is read past: the counts match within a few.
      expect(Math.abs(large.candidatesRead - small.candidatesRead), report).toBeLessThanOrEqual(LIMIT);
      // A deeper btree costs a level per index descent; nothing proportional to the backlog.
      expect(large.candidateBuffers, report).toBeLessThanOrEqual(2 * small.candidateBuffers + 10);
      expect(large.totalBuffers, report).toBeLessThanOrEqual(2 * small.totalBuffers);
    }
  }, 300_000);
});
