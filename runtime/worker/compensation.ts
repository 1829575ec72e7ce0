import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { EffectStatus, Json, LedgerflowDatabase } from '../store/tables.js';
import { STEP_EXECUTORS } from './executors/executors.js';
import { commitKnowingOutcome, commitSkipped, type StepExecution, type StepOutcome } from './executors/step-execution.js';
import { assertAttemptTransition, assertRunTransition } from './state-machines.js';
import { commitYield, leaseLost, type Lease } from './step-commits.js';

/*
 * Compensations: what a run whose steps declare `compensate` does once it failed for good, its
 * deadline passed, or a cancel asked for it. The run is positioned at its first compensation
 * (after the steps; `Workflow.compensations` orders them, the last declared step's first) with
 * `compensation` saying why, and goes on through pending and running like any run: each
 * compensation is a step of the compensated step's kind, run by that kind's executor with its
 * own ledger row, so it happens exactly once with the intent/result/reconcile protocol, and a
 * crash during it is taken over by the one claim path.
 *
 * Before a compensation runs, the ledger of the step it undoes decides:
 *   recorded           →  run it; its key sees the step's recorded output in `steps`
 *   none, released     →  skipped (the effect did not happen): recorded as skipped, no ledger row
 *   intent (open)      →  not decided yet: the run waits (rescheduled) until the reconciler has
 *                         settled that intent — in the ledger only, as for a finished run — then
 *                         decides on what it found
 * After the last compensation the run is `compensated`; a compensation that fails for good ends
 * it `compensation_failed` (failure-commits.ts).
 */

/** How long a compensation waits, at least, before it looks again at an intent the reconciler has not settled yet. */
const RECHECK_INTENT_MS = 1_000;

/** The ledger row of the step a compensation undoes, as the compensation decides on it. */
export interface CompensatedEffect {
  readonly status: EffectStatus;
  readonly effect: Json | null;
  readonly reconcile_after: Date | null;
}

/** The compensated step's ledger row: the recorded one if any, else an open intent, else a released one. */
export function compensatedEffectStatement(runId: string, stepName: string): RawBuilder<CompensatedEffect> {
  return sql<CompensatedEffect>`
    SELECT status, effect, reconcile_after
      FROM ledgerflow.step_effect
     WHERE workflow_id = ${runId} AND step_name = ${stepName}
     ORDER BY CASE status WHEN 'recorded' THEN 0 WHEN 'intent' THEN 1 ELSE 2 END
     LIMIT 1`;
}

/**
 * One attempt of a compensation (`s.step.compensates` is set): decides on the compensated step's
 * ledger row, then runs the compensation's kind's executor — with the step's recorded output in
 * `steps` — or records it skipped, or reschedules the run until an open intent is settled.
 */
export async function executeCompensation(s: StepExecution): Promise<StepOutcome> {
  const compensates = s.step.compensates!;
  const { rows } = await compensatedEffectStatement(s.run.id, compensates).execute(s.db);
  const effect = rows[0];
  if (effect === undefined || effect.status === 'released') return commitSkipped(s);
  if (effect.status === 'intent') {
    const earliest = new Date(Date.now() + RECHECK_INTENT_MS);
    const until = effect.reconcile_after !== null && effect.reconcile_after > earliest ? effect.reconcile_after : earliest;
    const reason =
      `step "${compensates}" has an open intent: whether its effect happened is reconciled first ` +
      `(compensate only what happened); "${s.step.name}" decides once it is settled`;
    const fenced = await commitKnowingOutcome(
      s,
      () => commitYield(s.db, { lease: s.lease, step: s.step, attempt: s.attempt, to: { kind: 'reschedule', until, reason } }),
      { retry: true },
    );
    if (!fenced) throw leaseLost(s.lease, 'the compensation reschedule');
    return { kind: 'rescheduled', until, reason };
  }
  const outputs = { ...s.run.outputs, [compensates]: effect.effect ?? s.run.outputs[compensates] ?? null };
  return STEP_EXECUTORS[s.step.kind]({ ...s, run: { ...s.run, outputs } });
}

/**
 * The run's deadline passed while it had compensations to run: instead of `cancelled`, it
 * compensates (`compensation = 'failure'`), positioned at its first compensation, due now, the
 * deadline kept as its error. Fenced like every commit of a held run.
 */
export async function compensateOverdue(db: Kysely<LedgerflowDatabase>, lease: Lease, compensateFrom: number): Promise<boolean> {
  const { rows } = await compensateOverdueStatement(lease, compensateFrom).execute(db);
  return rows[0]?.fenced === true;
}

/** The statement of {@link compensateOverdue}. */
export function compensateOverdueStatement(lease: Lease, compensateFrom: number): RawBuilder<{ fenced: boolean }> {
  assertRunTransition('running', 'pending');
  assertAttemptTransition('running', 'abandoned');
  return sql<{ fenced: boolean }>`
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = statement_timestamp(),
             updated_at = statement_timestamp(), compensation = 'failure', current_step = ${compensateFrom}::int,
             error = jsonb_build_object('name', 'DeadlineExceeded',
                                        'message', 'the run was still unfinished at its deadline (' || deadline_at || '); compensating')
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
         AND deadline_at <= statement_timestamp()
      RETURNING id
    ),
    closed AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = jsonb_build_object('name', 'DeadlineExceeded', 'message', 'the run passed its deadline')
       WHERE run_id = ${lease.runId} AND status = 'running' AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced`;
}
