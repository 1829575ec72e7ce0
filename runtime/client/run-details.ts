import type { Kysely } from 'kysely';
import { RunNotFoundError } from '../errors.js';
import type {
  LedgerflowDatabase,
  RunStatus,
  StepAttemptRow,
  StepEffectRow,
  StepResultRow,
  WorkflowRunRow,
} from '../store/tables.js';
import { assertRunId } from './validate-input.js';

/** A run with its three records: checkpointed step results, attempt history and effect ledger. */
export interface RunDetails extends WorkflowRunRow {
  /** One row per completed step, in commit order. */
  readonly steps: readonly StepResultRow[];
  /** Every attempt of every step, oldest first. */
  readonly attempts: readonly StepAttemptRow[];
  /** The run's ledger rows (intent, recorded or released), oldest first. */
  readonly effects: readonly StepEffectRow[];
}

/**
 * Statuses in which a run waits for nobody but a person or the reconciler, so `waitForRun`
 * returns: the three final ones plus `needs_reconciliation` (parked, visible, not retried).
 */
export const SETTLED_RUN_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled', 'needs_reconciliation'];

/** Reads the run and its records in one repeatable-read snapshot, so they agree with each other. */
export async function loadRunDetails(db: Kysely<LedgerflowDatabase>, runId: string): Promise<RunDetails> {
  assertRunId(runId);
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (trx) => {
      const run = await trx.selectFrom('ledgerflow.workflow_run').selectAll().where('id', '=', runId).executeTakeFirst();
      if (run === undefined) throw new RunNotFoundError(`No run with id ${runId} in this database.`);
      const steps = await trx
        .selectFrom('ledgerflow.step_result')
        .selectAll()
        .where('run_id', '=', runId)
        .orderBy('created_at')
        .orderBy('step_name')
        .execute();
      const attempts = await trx
        .selectFrom('ledgerflow.step_attempt')
        .selectAll()
        .where('run_id', '=', runId)
        .orderBy('started_at')
        .orderBy('step_name')
        .orderBy('attempt')
        .execute();
      const effects = await trx
        .selectFrom('ledgerflow.step_effect')
        .selectAll()
        .where('workflow_id', '=', runId)
        .orderBy('intent_at')
        .orderBy('step_name')
        .execute();
      return { ...run, steps, attempts, effects };
    });
}
