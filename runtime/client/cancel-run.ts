import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';
import { RUNS_CHANNEL } from '../store/channels.js';
import { assertAttemptTransition, assertRunTransition, CANCELLABLE_RUN_STATUSES } from '../store/state-machines.js';

/**
 * The statement of {@link Client.cancel}: the run `cancelled` if it is not final yet (and not
 * being compensated), its lease cleared, its wait ended and its fencing token moved on. The
 * `run_settled` trigger (core 0003) closes its running attempt as `abandoned` and cancels its
 * unfinished children, except those that are compensating (core 0017): they finish undoing their
 * effects.
 */
export function cancelRunStatement(db: Kysely<LedgerflowDatabase>, runId: string) {
  for (const from of CANCELLABLE_RUN_STATUSES) assertRunTransition(from, 'cancelled');
  return db
    .updateTable('ledgerflow.workflow_run')
    .set({
      status: 'cancelled',
      finished_at: sql<Date>`statement_timestamp()`,
      updated_at: sql<Date>`statement_timestamp()`,
      lease_owner: null,
      lease_expires_at: null,
      waiting_for: null,
      fencing_token: sql<number>`ledgerflow.next_fencing_token(fencing_token)`,
    })
    .where('id', '=', runId)
    .where('status', 'in', CANCELLABLE_RUN_STATUSES)
    .where('compensation', 'is', null)
    .returning('id');
}

/**
 * A cancel that compensates (core 0013), when `compensate` says so — or, left undefined, when the
 * run's workflow version defaults to it (`workflow_version.compensate_on_cancel`) — and the version
 * declares compensations: the run, not final and not being compensated yet, goes `pending` at its
 * first compensation, due now, with `compensation = 'cancel'`, its lease and wait cleared and its
 * fencing token moved on; its running attempt is closed as `abandoned` here (the run does not
 * settle, so no trigger does it). No row when the cancel is not one that compensates: the caller
 * then cancels plainly ({@link cancelRunStatement}).
 */
export function compensatingCancelStatement(
  runId: string,
  compensate: boolean | undefined,
): RawBuilder<{ id: string }> {
  for (const from of CANCELLABLE_RUN_STATUSES) assertRunTransition(from, 'pending');
  assertAttemptTransition('running', 'abandoned');
  return sql<{ id: string }>`
    WITH target AS (
      SELECT r.id,
             (SELECT min(d.position) FROM ledgerflow.workflow_step_def d
               WHERE d.workflow_name = r.workflow_name AND d.version = r.workflow_version AND d.compensates IS NOT NULL) AS compensate_from
        FROM ledgerflow.workflow_run r
        JOIN ledgerflow.workflow_version v ON v.workflow_name = r.workflow_name AND v.version = r.workflow_version
       WHERE r.id = ${runId} AND r.status IN (${sql.join(CANCELLABLE_RUN_STATUSES)}) AND r.compensation IS NULL
         AND COALESCE(${compensate ?? null}::boolean, v.compensate_on_cancel)
         FOR NO KEY UPDATE OF r
    ),
    moved AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'pending', compensation = 'cancel', current_step = t.compensate_from,
             run_after = statement_timestamp(), updated_at = statement_timestamp(),
             lease_owner = NULL, lease_expires_at = NULL, waiting_for = NULL, fencing_token = ledgerflow.next_fencing_token(r.fencing_token),
             error = jsonb_build_object('name', 'Cancelled', 'message', 'the run was cancelled; compensating its recorded effects')
        FROM target t
       WHERE r.id = t.id AND t.compensate_from IS NOT NULL
      RETURNING r.id
    ),
    closed AS (
      UPDATE ledgerflow.step_attempt a
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = jsonb_build_object('name', 'Cancelled', 'message', 'the run was cancelled')
        FROM moved m
       WHERE a.run_id = m.id AND a.status = 'running'
      RETURNING 1
    )
    -- Due now for its first compensation: announced like every run made due.
    SELECT id, pg_notify(${RUNS_CHANNEL}, id::text) AS notified FROM moved`;
}
