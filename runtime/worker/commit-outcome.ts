import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';
import { LEASE_EXPIRED, toLeasedRun, type LeasedRun, type LeasedRunRow } from '../store/leased-run.js';
import type { Lease } from './lease.js';
import { countsTowardBudget } from './retry.js';

/*
 * Where the database says a held run is, read when the worker cannot know: after a commit whose
 * outcome is unknown (the connection broke mid-commit), or a claim whose reply never came. Every
 * commit of a step closes its attempt, so the attempt row tells whether that commit happened
 * (`attemptCommitState`); a run still `running` under our token is still ours (`loadLeasedRun`).
 * Reads only, no state.
 */

export type CommitState = 'committed' | 'not_committed' | 'lost';

/**
 * After a commit whose outcome is unknown: every commit of a step closes its attempt, so the
 * attempt row tells whether it happened. A moved token means someone else owns the run now.
 */
export async function attemptCommitState(
  db: Kysely<LedgerflowDatabase>,
  lease: Lease,
  stepName: string,
  attempt: number,
): Promise<CommitState> {
  const { rows } = await attemptCommitStateStatement(lease, stepName, attempt).execute(db);
  const row = rows[0];
  if (row === undefined || row.fencing_token !== lease.fencingToken) return 'lost';
  return row.attempt_status === 'running' ? 'not_committed' : 'committed';
}

/** The read of {@link attemptCommitState}. */
export function attemptCommitStateStatement(
  lease: Lease,
  stepName: string,
  attempt: number,
): RawBuilder<{ fencing_token: number; attempt_status: string | null }> {
  return sql<{ fencing_token: number; attempt_status: string | null }>`
    SELECT r.fencing_token, a.status AS attempt_status
      FROM ledgerflow.workflow_run r
      LEFT JOIN ledgerflow.step_attempt a ON a.run_id = r.id AND a.step_name = ${stepName} AND a.attempt = ${attempt}
     WHERE r.id = ${lease.runId}`;
}

/**
 * Re-reads a run this worker believes it holds, after a commit whose outcome is unknown: the
 * database says where the run is. `undefined` when the lease is no longer ours (or the run was
 * released by that very commit) — the caller stops driving it.
 */
export async function loadLeasedRun(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  fencingToken: number,
): Promise<LeasedRun | undefined> {
  const { rows } = await loadLeasedRunStatement(runId, fencingToken).execute(db);
  const row = rows[0];
  if (row === undefined) return undefined;
  // A held run always has its current step's attempt open; without one, the lease is not usable.
  if (row.attempt === null) return undefined;
  return toLeasedRun(row);
}

/** The read of {@link loadLeasedRun}: the run, if it is still `running` under `fencingToken`. */
export function loadLeasedRunStatement(runId: string, fencingToken: number): RawBuilder<LeasedRunRow> {
  return sql<LeasedRunRow>`
    SELECT r.id, r.workflow_name, r.workflow_version, r.input, r.current_step, r.fencing_token,
           COALESCE(r.deadline_at <= statement_timestamp(), false) AS overdue,
           a.attempt,
           (SELECT count(*) FROM ledgerflow.step_attempt f
             WHERE f.run_id = r.id AND f.step_name = d.step_name AND f.status = 'failed'
               AND ${countsTowardBudget('f', 'r')})::int AS prior_failures,
           (SELECT count(*) FROM ledgerflow.step_attempt f
             WHERE f.run_id = r.id AND f.step_name = d.step_name AND f.status = 'abandoned'
               AND f.error->>'name' = ${LEASE_EXPIRED}::text AND ${countsTowardBudget('f', 'r')})::int AS crashes,
           false AS repeated_crash, false AS took_over, r.trace_context,
           (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res
             WHERE res.run_id = r.id AND NOT res.skipped) AS outputs
      FROM ledgerflow.workflow_run r
      LEFT JOIN ledgerflow.workflow_step_def d
        ON d.workflow_name = r.workflow_name AND d.version = r.workflow_version AND d.position = r.current_step
      LEFT JOIN ledgerflow.step_attempt a
        ON a.run_id = r.id AND a.step_name = d.step_name AND a.status = 'running'
     WHERE r.id = ${runId} AND r.fencing_token = ${fencingToken} AND r.status = 'running'`;
}

/** The runs the database says `workerId` holds: what a claim whose reply never came may have taken (the claim loop adopts them). */
export async function heldRuns(
  db: Kysely<LedgerflowDatabase>,
  workerId: string,
): Promise<Array<{ id: string; fencing_token: number }>> {
  return (await heldRunsStatement(workerId).execute(db)).rows;
}

/** The read of {@link heldRuns}. */
export function heldRunsStatement(workerId: string): RawBuilder<{ id: string; fencing_token: number }> {
  return sql<{ id: string; fencing_token: number }>`
        SELECT id, fencing_token FROM ledgerflow.workflow_run WHERE status = 'running' AND lease_owner = ${workerId}`;
}
