import { sql, type Kysely } from 'kysely';
import type { Json, LedgerflowDatabase, RunStatus } from '../store/tables.js';
import { millis } from '../worker/claim.js';
import type { Lease } from '../worker/step-commits.js';
import { assertEffectTransition, assertRunTransition } from '../worker/state-machines.js';

/** The reconciler's own fenced writes; recording a found effect reuses the worker's `advanceRun`. */
export interface ReconcileClaim {
  readonly lease: Lease;
  readonly previousStatus: RunStatus;
  readonly previousError: Json | null;
  readonly outputs: Readonly<Record<string, Json>>;
}

/**
 * Takes a run whose intent is due for reconciliation the way a worker claims one — lock
 * without waiting, `fencing_token + 1`, any `running` attempt of a dead owner abandoned — so
 * that a zombie still holding the old token can commit nothing while the provider is asked.
 * Only runs that nobody holds: pending, parked, or running under an expired lease.
 */
export async function claimForReconcile(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  position: number,
  reconcilerId: string,
  leaseMs: number,
): Promise<ReconcileClaim | undefined> {
  const { rows } = await sql<{
    fencing_token: number;
    previous_status: RunStatus;
    previous_error: Json | null;
    outputs: Record<string, Json> | null;
  }>`
    WITH target AS (
      SELECT id, status AS previous_status, error AS previous_error
        FROM ledgerflow.workflow_run
       WHERE id = ${runId} AND current_step = ${position}
         AND (status IN ('pending', 'needs_reconciliation') OR (status = 'running' AND lease_expires_at <= now()))
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    claimed AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running', lease_owner = ${reconcilerId}, lease_expires_at = now() + ${millis(leaseMs)},
             fencing_token = r.fencing_token + 1, updated_at = now()
        FROM target t
       WHERE r.id = t.id
      RETURNING r.fencing_token
    ),
    abandoned AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = now(),
             error = jsonb_build_object('name', 'LeaseExpired', 'message', 'the run was taken over by the reconciler')
       WHERE run_id = ${runId} AND status = 'running' AND EXISTS (SELECT 1 FROM claimed)
      RETURNING 1
    )
    SELECT c.fencing_token, t.previous_status, t.previous_error,
           (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res WHERE res.run_id = ${runId}) AS outputs
      FROM claimed c, target t`.execute(db);
  const row = rows[0];
  if (row === undefined) return undefined;
  assertRunTransition(row.previous_status, 'running');
  return {
    lease: { runId, fencingToken: row.fencing_token, workerId: reconcilerId, leaseMs },
    previousStatus: row.previous_status,
    previousError: row.previous_error,
    outputs: row.outputs ?? {},
  };
}

/**
 * `not_found`: the intent is released (the next attempt re-takes the same key) and the run is
 * given back as pending — or, when it had been parked because its attempts were exhausted,
 * failed with the last error, since the effect is now known not to have happened.
 */
export async function releaseIntent(
  db: Kysely<LedgerflowDatabase>,
  claim: ReconcileClaim,
  stepName: string,
  key: string,
  intentAttempt: number,
  failWith: Json | undefined,
): Promise<boolean> {
  assertEffectTransition('intent', 'released');
  assertRunTransition('running', failWith === undefined ? 'pending' : 'failed');
  const { lease } = claim;
  const runSet =
    failWith === undefined
      ? sql`status = 'pending', run_after = now(), error = NULL`
      : sql`status = 'failed', finished_at = now(), error = ${JSON.stringify(failWith)}::jsonb`;
  const { rows } = await sql<{ released: boolean }>`
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now(), ${runSet}
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
      RETURNING id
    ),
    released AS (
      UPDATE ledgerflow.step_effect
         SET status = 'released', resolution = 'released by the reconciler: not found at the provider'
       WHERE workflow_id = ${lease.runId} AND step_name = ${stepName} AND idempotency_key = ${key}
         AND status = 'intent' AND attempt = ${intentAttempt} AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM released) AS released`.execute(db);
  return rows[0]?.released === true;
}

/** `unknown` (or a reconcile that failed): park the run with the reason; a later pass asks again. */
export async function parkRun(db: Kysely<LedgerflowDatabase>, claim: ReconcileClaim, error: Json): Promise<boolean> {
  assertRunTransition('running', 'needs_reconciliation');
  const { lease } = claim;
  const { rows } = await sql<{ id: string }>`
    UPDATE ledgerflow.workflow_run
       SET status = 'needs_reconciliation', lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
           error = ${JSON.stringify(error)}::jsonb
     WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
    RETURNING id`.execute(db);
  return rows.length === 1;
}
