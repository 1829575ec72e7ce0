import type { Kysely } from 'kysely';
import { RunNotFoundError, RunPrunedError } from '../errors.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import type { FinalRunStatus } from './prune.js';

/** What is left of a pruned run (run_archive, core 0008): its identity and how it ended. */
export interface PrunedRun {
  readonly id: string;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly dedupeKey: string | null;
  readonly status: FinalRunStatus;
  readonly createdAt: Date;
  readonly finishedAt: Date;
  readonly prunedAt: Date;
}

/** The archived run with this id, if it was pruned. */
export async function findPrunedRun(db: Kysely<LedgerflowDatabase>, runId: string): Promise<PrunedRun | undefined> {
  const row = await db
    .selectFrom('ledgerflow.run_archive')
    .select(['id', 'workflow_name', 'workflow_version', 'dedupe_key', 'status', 'created_at', 'finished_at', 'pruned_at'])
    .where('id', '=', runId)
    .executeTakeFirst();
  return row === undefined ? undefined : toPrunedRun(row);
}

export function toPrunedRun(row: {
  readonly id: string;
  readonly workflow_name: string;
  readonly workflow_version: number;
  readonly dedupe_key: string | null;
  readonly status: FinalRunStatus;
  readonly created_at: Date;
  readonly finished_at: Date;
  readonly pruned_at: Date;
}): PrunedRun {
  return {
    id: row.id,
    workflowName: row.workflow_name,
    workflowVersion: row.workflow_version,
    dedupeKey: row.dedupe_key,
    status: row.status,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
    prunedAt: row.pruned_at,
  };
}

/**
 * The error for a run id that names no live run: `RunPrunedError` when the run was pruned (its
 * final status and times are in the archive), `RunNotFoundError` otherwise. Read only after the
 * live run was not found, so it costs nothing on the way to an existing run.
 */
export async function missingRunError(db: Kysely<LedgerflowDatabase>, runId: string, consequence = ''): Promise<RunNotFoundError | RunPrunedError> {
  const pruned = await findPrunedRun(db, runId);
  if (pruned === undefined) return new RunNotFoundError(`No run with id ${runId} in this database${consequence}.`);
  return new RunPrunedError(
    `Run ${runId} (${pruned.workflowName}) ${pruned.status} at ${pruned.finishedAt.toISOString()} and was pruned at ` +
      `${pruned.prunedAt.toISOString()}: its state, attempts and ledger are gone; its identity and recorded effects are archived${consequence}.`,
    pruned,
  );
}
