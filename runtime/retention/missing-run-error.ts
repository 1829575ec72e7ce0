import type { Kysely } from 'kysely';
import { RunNotFoundError, RunPrunedError } from '../errors.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { PRUNED_RUN_COLUMNS, toPrunedRun, type PrunedRun } from './pruned-run.js';

/*
 * Tells a pruned run from one that never existed, by reading the archive. Kept apart from
 * pruned-run.ts, which errors.ts imports for `RunPrunedError.run`: that file is data, this one
 * builds the errors.
 */

/** The archived run with this id, if it was pruned. */
export async function findPrunedRun(db: Kysely<LedgerflowDatabase>, runId: string): Promise<PrunedRun | undefined> {
  const row = await db
    .selectFrom('ledgerflow.run_archive')
    .select(PRUNED_RUN_COLUMNS)
    .where('id', '=', runId)
    .executeTakeFirst();
  return row === undefined ? undefined : toPrunedRun(row);
}

/**
 * The error for a run id that names no live run: `RunPrunedError` when the run was pruned (its
 * final status and times are in the archive), `RunNotFoundError` otherwise. Read only after the
 * live run was not found, so it costs nothing on the way to an existing run.
 */
export async function missingRunError(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  consequence = '',
): Promise<RunNotFoundError | RunPrunedError> {
  const pruned = await findPrunedRun(db, runId);
  if (pruned === undefined) return new RunNotFoundError(`No run with id ${runId} in this database${consequence}.`);
  return new RunPrunedError(
    `Run ${runId} (${pruned.workflowName}) ${pruned.status} at ${pruned.finishedAt.toISOString()} and was pruned at ` +
      `${pruned.prunedAt.toISOString()}: its state, attempts and ledger are gone; its identity and recorded effects are archived${consequence}.`,
    pruned,
  );
}
