import { sql, type Kysely, type RawBuilder } from 'kysely';
import { ConflictError } from '../../errors.js';
import { RUNS_CHANNEL } from '../../store/channels.js';
import {
  assertRunTransition,
  CHILDREN_READ_ON_RETRY,
  ENDED_UNCOMPLETED_RUN_STATUSES,
  RETRYABLE_RUN_STATUSES,
  runStatusIn,
  sqlStatusList,
} from '../../store/state-machines.js';
import { FINAL_RUN_STATUSES, type LedgerflowDatabase, type RunStatus } from '../../store/tables.js';
import { assertRunId } from '../validate-input.js';
import { audit, checkNote, lockRun, type OperatorNote } from './operator-action.js';

/** What {@link Client.retryRun} did. */
export interface RetriedRun {
  readonly runId: string;
  /** The step the run resumes at, with a fresh attempt budget. */
  readonly fromStep: string;
  /**
   * `compensation_failed`: the run resumes its compensation at the one that failed, with the
   * remaining ones after it (core 0013; `compensation` stays as it was).
   */
  readonly previousStatus: 'failed' | 'cancelled' | 'compensation_failed';
}

/** The final statuses, a retry's, and those a parent counts as failed children (core 0003, 0013), as literal SQL lists. */
const FINAL_SQL = sqlStatusList(FINAL_RUN_STATUSES);
const RETRYABLE_SQL = sqlStatusList(RETRYABLE_RUN_STATUSES);
const CHILD_FAILED_SQL = sqlStatusList(ENDED_UNCOMPLETED_RUN_STATUSES);

/**
 * The retry: the run `pending` and due now at the step it stopped at, `finished_at` and `error`
 * cleared, its fencing token moved on, a deadline that has passed dropped, and the step's
 * attempts so far put behind its budget (`budget_step`, `budget_base` = the step's last attempt).
 * Its children counters are recounted from the children themselves: a child retried on its own
 * while this run was over settled without moving them. Notifies the workers at commit.
 *
 * A `compensation_failed` run keeps `compensation`: it is pending at the compensation that failed
 * (its `current_step`), and goes on with the remaining compensations, to `compensated`.
 */
export function retryRunStatement(runId: string, stepName: string): RawBuilder<{ deadline_at: Date | null }> {
  for (const from of RETRYABLE_RUN_STATUSES) assertRunTransition(from, 'pending');
  return sql<{ deadline_at: Date | null }>`
    WITH retried AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'pending', run_after = statement_timestamp(), updated_at = statement_timestamp(),
             finished_at = NULL, error = NULL, output = NULL, waiting_for = NULL, lease_owner = NULL, lease_expires_at = NULL,
             fencing_token = ledgerflow.next_fencing_token(r.fencing_token),
             deadline_at = CASE WHEN r.deadline_at <= statement_timestamp() THEN NULL ELSE r.deadline_at END,
             budget_step = ${stepName},
             budget_base = (SELECT COALESCE(max(a.attempt), 0) FROM ledgerflow.step_attempt a
                             WHERE a.run_id = r.id AND a.step_name = ${stepName}),
             children_open = (SELECT count(*) FROM ledgerflow.workflow_run c
                               WHERE c.parent_run_id = r.id AND c.status NOT IN (${FINAL_SQL})),
             children_failed = (SELECT count(*) FROM ledgerflow.workflow_run c
                                 WHERE c.parent_run_id = r.id AND c.status IN (${CHILD_FAILED_SQL}))
       WHERE r.id = ${runId} AND r.status IN (${RETRYABLE_SQL})
      RETURNING r.id, r.deadline_at
    )
    SELECT deadline_at, pg_notify(${RUNS_CHANNEL}, id::text) AS notified FROM retried`;
}

/** {@link Client.retryRun}. */
export async function retryRun(db: Kysely<LedgerflowDatabase>, runId: string, note: OperatorNote): Promise<RetriedRun> {
  assertRunId(runId);
  const checked = checkNote(note, true)!;
  return db.transaction().execute(async (trx) => {
    const run = await lockRun(trx, runId);
    if (!isRetryable(run.status)) {
      throw new ConflictError(
        `Run ${runId} is ${run.status}: only a failed, cancelled or compensation_failed run can be retried. Nothing was done.`,
      );
    }
    if (run.step_name === null) {
      throw new ConflictError(
        `Run ${runId} stopped after its last step (step ${run.current_step}): there is no step to retry. Nothing was done.`,
      );
    }
    if (run.parent_run_id !== null) {
      const parent = await trx
        .selectFrom('ledgerflow.workflow_run')
        .select('status')
        .where('id', '=', run.parent_run_id)
        .executeTakeFirst();
      if (parent !== undefined && !runStatusIn(FINAL_RUN_STATUSES, parent.status)) {
        throw new ConflictError(
          `Run ${runId} is a child of run ${run.parent_run_id}, which is still ${parent.status} and will fail or be cancelled ` +
            'because this child did: retry this child once its parent is over, then the parent. Nothing was done.',
        );
      }
    }
    // Its step reads its children again: one that was pruned would be missing from its output.
    // Prune keeps them while this run stays; a pass stopped between a child and this run (or one
    // before that rule) leaves them archived (core 0019 indexes them by parent).
    if (CHILDREN_READ_ON_RETRY.includes(run.status)) {
      const pruned = await trx
        .selectFrom('ledgerflow.run_archive')
        .select('id')
        .where('parent_run_id', '=', runId)
        .limit(6)
        .execute();
      if (pruned.length > 0) {
        const listed = pruned.slice(0, 5).map((c) => c.id);
        throw new ConflictError(
          `Run ${runId} cannot be retried: its children were pruned (${listed.join(', ')}${pruned.length > 5 ? ', …' : ''}). ` +
            `Its step "${run.step_name}" would read them again and find them gone; the run's outcome stands — start a new run ` +
            'if the work must be done. Nothing was done.',
        );
      }
    }
    // A compensation reads no children: a compensation_failed run resumes whatever became of them.
    const stopped =
      run.status === 'compensation_failed'
        ? []
        : await trx
            .selectFrom('ledgerflow.workflow_run')
            .select(['id', 'status'])
            .where('parent_run_id', '=', runId)
            .where('status', 'in', ENDED_UNCOMPLETED_RUN_STATUSES)
            .orderBy('parent_index')
            .limit(6)
            .execute();
    if (stopped.length > 0) {
      const listed = stopped.slice(0, 5).map((c) => `${c.id} (${c.status})`);
      const compensated = stopped.some((c) => c.status === 'compensated');
      throw new ConflictError(
        `Run ${runId} has children that did not complete: ${listed.join(', ')}${stopped.length > 5 ? ', …' : ''}. ` +
          'Its step would find them again and fail: retry them first (`ledgerflow retry <child-id>`), then this run' +
          (compensated
            ? '; a compensated child has undone its effects and cannot be retried, so this run cannot go on from that step'
            : '') +
          '. Nothing was done.',
      );
    }
    const { rows } = await retryRunStatement(runId, run.step_name).execute(trx);
    if (rows.length !== 1)
      throw new ConflictError(`Run ${runId} changed while it was being retried. Nothing was done.`);
    const previousStatus: RetriedRun['previousStatus'] = run.status;
    await audit(trx, checked, {
      action: 'retry',
      runId,
      target: run.step_name,
      detail: {
        previousStatus,
        fromStep: run.step_name,
        deadlineDropped: run.deadline_at !== null && rows[0]!.deadline_at === null,
      },
    });
    return { runId, fromStep: run.step_name, previousStatus };
  });
}

function isRetryable(status: RunStatus): status is (typeof RETRYABLE_RUN_STATUSES)[number] {
  return runStatusIn(RETRYABLE_RUN_STATUSES, status);
}
