import type { Kysely } from 'kysely';
import type {
  LedgerflowDatabase,
  RunStatus,
  StepAttemptRow,
  StepEffectRow,
  StepResultRow,
  StepWaitRow,
  WorkflowRunRow,
} from '../store/tables.js';
import type { SettledRunStatus } from '../store/state-machines.js';
import { missingRunError } from '../retention/missing-run-error.js';
import { assertRunId } from './validate-input.js';

/** A run with its three records: checkpointed step results, attempt history and effect ledger. */
export interface RunDetails extends WorkflowRunRow {
  /** One row per completed step, in commit order. */
  readonly steps: readonly StepResultRow[];
  /** Every attempt of every step, oldest first. */
  readonly attempts: readonly StepAttemptRow[];
  /** The run's ledger rows (intent, recorded or released), oldest first. */
  readonly effects: readonly StepEffectRow[];
  /** What its sleep and waitFor steps waited or wait for (fixed when the run first reached them). */
  readonly waits: readonly StepWaitRow[];
  /** The runs its child and forEach steps started, by step and item order (at most {@link MAX_LISTED_CHILDREN}). */
  readonly children: readonly ChildRunSummary[];
}

export interface ChildRunSummary {
  readonly id: string;
  readonly workflowName: string;
  readonly step: string;
  readonly index: number;
  readonly status: RunStatus;
}

/** `getRun` lists this many children at most (a fan-out may have millions); `listRuns` finds the rest. */
export const MAX_LISTED_CHILDREN = 1_000;

/** Defined beside the run status machine (store/state-machines.ts); exported here too, with the rest of what `waitForRun` returns. */
export { SETTLED_RUN_STATUSES, type SettledRunStatus } from '../store/state-machines.js';

/**
 * How a run ended, as `waitForRun` and `startAndWait` return it: its identity, its settled status,
 * its output and its error, as stored (the `workflow_run` columns of the same names). Its steps,
 * attempts and ledger rows are `getRun(run.id)`'s: a wait answered by the worker of its own
 * process reads nothing at all (wait-for-run.ts), so it returns only what that worker holds.
 */
export type SettledRun = Pick<WorkflowRunRow, 'id' | 'workflow_name' | 'workflow_version' | 'output' | 'error'> & {
  readonly status: SettledRunStatus;
};

/**
 * Reads the run and its records in one repeatable-read snapshot, so they agree with each other.
 * `RunPrunedError` for a run that was pruned, `RunNotFoundError` for one that never existed.
 */
export async function loadRunDetails(db: Kysely<LedgerflowDatabase>, runId: string): Promise<RunDetails> {
  assertRunId(runId);
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (trx) => {
      const run = await trx
        .selectFrom('ledgerflow.workflow_run')
        .selectAll()
        .where('id', '=', runId)
        .executeTakeFirst();
      if (run === undefined) throw await missingRunError(trx, runId);
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
      const waits = await trx
        .selectFrom('ledgerflow.step_wait')
        .selectAll()
        .where('run_id', '=', runId)
        .orderBy('created_at')
        .orderBy('step_name')
        .execute();
      const children = await trx
        .selectFrom('ledgerflow.workflow_run')
        .select(['id', 'workflow_name as workflowName', 'parent_step as step', 'parent_index as index', 'status'])
        .where('parent_run_id', '=', runId)
        .orderBy('created_at')
        .orderBy('parent_step')
        .orderBy('parent_index')
        .limit(MAX_LISTED_CHILDREN)
        .execute();
      return {
        ...run,
        steps,
        attempts,
        effects,
        waits,
        children: children.map((c) => ({ ...c, step: c.step ?? '', index: c.index ?? 0 })),
      };
    });
}
