import { sql, type Kysely } from 'kysely';
import type { AnyWorkflow } from '../../dsl/index.js';
import type { LedgerflowDatabase } from '../../runtime/store/tables.js';

/**
 * The backlog of the scale plan test (tests/runtime/claim-scale-plan.test.ts) and of the scale
 * bench (bench/workloads/scale.ts): unfinished runs in the states a claim must look past, in
 * twentieths of the total. Due runs of both workflows are interleaved in `run_after` order (a
 * permutation of the run number), so a larger backlog puts new runs among the old ones.
 */
export const SCALE_BACKLOG_TWENTIETHS = {
  /** pending and due, of the workflow the claiming worker runs */
  dueRegistered: 6,
  /** pending and due, of a workflow it does not run (read past by filter, 2 for every 3 of ours) */
  dueOther: 4,
  /** pending, due in a day (a retry backoff, a delayed start) */
  notDue: 3,
  /** running under a live lease of another worker */
  leased: 2,
  /** waiting: asleep until tomorrow */
  sleeping: 3,
  /** waiting for a queue slot (run_after = 'infinity' until a grant wakes it) */
  queued: 2,
} as const;

export interface ScaleBacklogRange {
  /** Runs numbered `from + 1` … `to` are inserted. */
  readonly from: number;
  readonly to: number;
  /** The claiming worker's workflow (input `{ label }` or any object: it is never run here). */
  readonly registered: AnyWorkflow;
  /** A workflow the claiming worker does not run. */
  readonly other: AnyWorkflow;
}

/**
 * Inserts runs `from + 1` … `to` of the backlog in one statement, then VACUUM ANALYZE (outside
 * any transaction: pass a pool, not a transaction). Returns the number inserted.
 */
export async function fillScaleBacklog(db: Kysely<LedgerflowDatabase>, r: ScaleBacklogRange): Promise<number> {
  const t = SCALE_BACKLOG_TWENTIETHS;
  const b1 = t.dueRegistered;
  const b2 = b1 + t.dueOther;
  const b3 = b2 + t.notDue;
  const b4 = b3 + t.leased;
  const b5 = b4 + t.sleeping;
  const { rows } = await sql<{ n: number }>`
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run
             (id, workflow_name, workflow_version, input, status, run_after, lease_owner, lease_expires_at, waiting_for)
      SELECT gen_random_uuid(),
             CASE WHEN k >= ${b1} AND k < ${b2} THEN ${r.other.name} ELSE ${r.registered.name} END,
             CASE WHEN k >= ${b1} AND k < ${b2} THEN ${r.other.version}::int ELSE ${r.registered.version}::int END,
             jsonb_build_object('label', 'scale-' || g, 'n', g),
             CASE WHEN k < ${b3} THEN 'pending' WHEN k < ${b4} THEN 'running' ELSE 'waiting' END,
             CASE WHEN k < ${b2} THEN timestamptz '2020-01-01' + ((g::bigint * 7919) % 1000003) * interval '1 millisecond'
                  WHEN k < ${b4} THEN statement_timestamp() + interval '1 day' + g * interval '1 millisecond'
                  WHEN k < ${b5} THEN statement_timestamp() + interval '1 day' + g * interval '1 second'
                  ELSE 'infinity' END,
             CASE WHEN k >= ${b3} AND k < ${b4} THEN 'elsewhere' END,
             CASE WHEN k >= ${b3} AND k < ${b4} THEN statement_timestamp() + interval '1 hour' + g * interval '1 millisecond' END,
             CASE WHEN k >= ${b5} THEN jsonb_build_object('kind', 'queue', 'step', '', 'queue', 'scale-queue', 'partition', '*', 'until', null)
                  WHEN k >= ${b4} THEN jsonb_build_object('kind', 'sleep', 'step', 'explode', 'until', (statement_timestamp() + interval '1 day')::text)
             END
        FROM generate_series(${r.from + 1}::int, ${r.to}::int) AS g, LATERAL (SELECT g % 20 AS k) x
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM inserted`.execute(db);
  await sql`VACUUM ANALYZE ledgerflow.workflow_run`.execute(db);
  return rows[0]!.n;
}

/** How many of `total` backlog runs are in states the claim skips by index range (not due yet). */
export function notDueCount(total: number): number {
  const t = SCALE_BACKLOG_TWENTIETHS;
  return (total / 20) * (t.notDue + t.sleeping + t.queued);
}
