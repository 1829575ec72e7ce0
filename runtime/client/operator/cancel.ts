import type { Kysely } from 'kysely';
import { z } from 'zod';
import { checkOptions, rule } from '../../../dsl/option-checks.js';
import { RunPrunedError, ValidationError } from '../../errors.js';
import { missingRunError } from '../../retention/missing-run-error.js';
import type { LedgerflowDatabase } from '../../store/tables.js';
import { cancelRunStatement, compensatingCancelStatement } from '../cancel-run.js';
import { assertRunId } from '../validate-input.js';
import { audit, checkNote, lockRun, type OperatorNote } from './operator-action.js';

/*
 * `cancel` (Client.cancel): one statement; the run_settled trigger closes the run's running attempt
 * (the worker that held the lease can no longer finish it: fenced out) and cancels its children.
 * With a note, the run is locked first (its previous status goes into the audit row), and the
 * audit row is written in the same transaction.
 */

/**
 * What `cancel` takes: whether to compensate (default: the workflow's `compensateOnCancel`) and an
 * optional note (`actor` and `reason` together) for the audit trail.
 */
export interface CancelOptions extends Partial<OperatorNote> {
  /** Undo the run's recorded effects (its steps' compensations) instead of just stopping it. */
  readonly compensate?: boolean;
}

/** The cancel itself: one that compensates if it is to, else the plain one. */
async function cancelStatements(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  compensate: boolean | undefined,
): Promise<boolean> {
  if (compensate !== false && (await compensatingCancelStatement(runId, compensate).execute(db)).rows.length > 0)
    return true;
  return (await cancelRunStatement(db, runId).executeTakeFirst()) !== undefined;
}

/** What {@link CancelOptions} allow besides the note (checked by checkNote). */
const cancelOptionsSchema = z.object({ compensate: rule(z.boolean(), 'must be true or false').optional() });

async function cancelLiveRun(db: Kysely<LedgerflowDatabase>, runId: string, options?: CancelOptions): Promise<boolean> {
  assertRunId(runId);
  const note = options?.actor === undefined && options?.reason === undefined ? undefined : (options as OperatorNote);
  const checked = checkNote(note, false);
  checkOptions(
    cancelOptionsSchema,
    options ?? {},
    (problems) => new ValidationError(`cancel: ${problems[0]}.`, ['compensate: not a boolean']),
    {
      show: JSON.stringify,
    },
  );
  const compensate = options?.compensate;
  if (checked === undefined) {
    if (await cancelStatements(db, runId, compensate)) return true;
    const exists = await db
      .selectFrom('ledgerflow.workflow_run')
      .select('id')
      .where('id', '=', runId)
      .executeTakeFirst();
    if (exists === undefined) throw await missingRunError(db, runId);
    return false;
  }
  return db.transaction().execute(async (trx) => {
    const run = await lockRun(trx, runId);
    if (!(await cancelStatements(trx, runId, compensate))) return false;
    await audit(trx, checked, {
      action: 'cancel',
      runId,
      target: null,
      detail: { previousStatus: run.status, ...(compensate !== undefined ? { compensate } : {}) },
    });
    return true;
  });
}

/** Cancel of a run that is gone: a pruned run was final (nothing to cancel, `false`); otherwise not found. */
export async function cancelRun(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  options?: CancelOptions,
): Promise<boolean> {
  try {
    return await cancelLiveRun(db, runId, options);
  } catch (error) {
    if (error instanceof RunPrunedError) return false;
    throw error;
  }
}
