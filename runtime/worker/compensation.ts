import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import { NotAppliedError } from '../errors.js';
import { faultPoint } from '../faults/fault-points.js';
import { withStoredOutput } from '../store/stored-json.js';
import type { EffectStatus, Json, LedgerflowDatabase } from '../store/tables.js';
import { STEP_EXECUTORS } from './executors/executors.js';
import { performWithinLease, type ExternalHandler } from './executors/external-executor.js';
import {
  commitKnowingOutcome,
  commitSkipped,
  validateOutput,
  type StepExecution,
  type StepOutcome,
} from './executors/step-execution.js';
import { fenceAtStep, intentHorizon } from './ledger.js';
import { settledByKey } from './registry.js';
import { assertAttemptTransition, assertEffectTransition, assertRunTransition } from '../store/state-machines.js';
import { commitYield } from './yield-commits.js';
import { leaseLost, type Lease } from './lease.js';
import { recordableText, ResyncNeeded, StepFailure, userCode } from './step-errors.js';

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
 *                         decides on what it found. Once a lookup of the intent could not settle
 *                         it (the provider could not tell, its answer cannot be recorded), the
 *                         run parks in `needs_reconciliation` — visibly waiting for the reconciler
 *                         or an operator's resolve, as a live run with such an intent does — and
 *                         the settle wakes it (yield-commits.ts, `await-settlement`). Or, for a step whose provider dedupes by key
 *                         and that has no reconcile ({@link settledByKey}), the compensation takes
 *                         the intent over and performs the step again with the same key: the
 *                         provider answers with the effect if it happened, or applies it now, and
 *                         either way it is recorded and then undone. Nothing else can tell, and a
 *                         compensation that skipped it could leave a charge without its refund.
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
  readonly idempotency_key: string;
  /** Lookups of an open intent so far (the worker's own and the reconciler's). */
  readonly reconcile_attempts: number;
  /** What the last lookup found, or why it could not settle the intent. */
  readonly resolution: string | null;
}

/** The compensated step's ledger row: the recorded one if any, else an open intent, else a released one. */
export function compensatedEffectStatement(runId: string, stepName: string): RawBuilder<CompensatedEffect> {
  return sql<CompensatedEffect>`
    SELECT status, effect, reconcile_after, idempotency_key, reconcile_attempts, resolution
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
    const undone = s.workflow.steps.find((d) => d.name === compensates);
    if (undone !== undefined && settledByKey(s.workflow, undone)) return takeOverByKey(s, undone);
    if (effect.reconcile_attempts > 0) return awaitSettlement(s, compensates, effect);
    const earliest = new Date(Date.now() + RECHECK_INTENT_MS);
    const until =
      effect.reconcile_after !== null && effect.reconcile_after > earliest ? effect.reconcile_after : earliest;
    const reason =
      `step "${compensates}" has an open intent: whether its effect happened is reconciled first ` +
      `(compensate only what happened); "${s.step.name}" decides once it is settled`;
    const fenced = await commitKnowingOutcome(
      s,
      () =>
        commitYield(s.db, {
          lease: s.lease,
          step: s.step,
          attempt: s.attempt,
          to: { kind: 'reschedule', until, reason },
        }),
      { retry: true },
    );
    if (!fenced) throw leaseLost(s.lease, 'the compensation reschedule');
    return { kind: 'rescheduled', until, reason };
  }
  const outputs = withStoredOutput(s.run.outputs, compensates, effect.effect ?? s.run.outputs[compensates] ?? null);
  return STEP_EXECUTORS[s.step.kind]({ ...s, run: { ...s.run, outputs } });
}

/**
 * The compensated step's open intent was looked up and could not be settled: park the run until
 * the reconciler or an operator settles it (the settle wakes it), or — when it was settled
 * meanwhile — go pending now and decide.
 */
async function awaitSettlement(s: StepExecution, compensates: string, effect: CompensatedEffect): Promise<StepOutcome> {
  const last = effect.resolution === null ? '' : ` (last lookup: ${effect.resolution})`;
  const reason =
    `compensation "${s.step.name}" waits for step "${compensates}"'s open intent (key "${effect.idempotency_key}"): ` +
    `${effect.reconcile_attempts} lookup(s) could not tell whether its effect happened${last}; the reconciler asks again, ` +
    `or settle it with: ledgerflow resolve ${s.run.id} ${compensates} (--found <json> | --not-found) --reason <text>`;
  const fenced = await commitKnowingOutcome(
    s,
    () =>
      commitYield(s.db, {
        lease: s.lease,
        step: s.step,
        attempt: s.attempt,
        to: { kind: 'await-settlement', reason, awaits: compensates, key: effect.idempotency_key },
      }),
    { retry: true },
  );
  if (!fenced) throw leaseLost(s.lease, 'the compensation park');
  return { kind: 'parked', reason };
}

/**
 * The compensated step (`undone`: external, idempotentByKey, no reconcile) left an open intent:
 * take it over under this compensation's lease (fenced, its horizon renewed), perform `undone`
 * again with the intent's own key — the provider dedupes, so this returns the effect if it
 * happened and applies it otherwise — record it in the ledger, then run the compensation on it.
 *
 * Fails like a perform of the compensation's own: the intent stays open and the next attempt
 * takes it over again (the same key, so never a second effect), except that a `NotAppliedError`
 * (the provider refused the key: nothing happened) releases it and the compensation is skipped.
 */
async function takeOverByKey(s: StepExecution, undone: StepDefinition): Promise<StepOutcome> {
  const takingAt = performance.now();
  const { rows } = await takeOverIntentStatement(s.lease, s.step, undone).execute(s.db);
  const taken = rows[0];
  if (taken === undefined || !taken.fenced) throw leaseLost(s.lease, `the take-over of step "${undone.name}"'s intent`);
  // Settled meanwhile (an operator's resolve): decide again on what the ledger says now.
  if (taken.key === null) throw new ResyncNeeded();
  const key = taken.key;
  const as = { ...s, step: undone };
  let output: Json;
  try {
    const value = await performWithinLease(
      as,
      s.workflow.handler(undone.name) as ExternalHandler,
      key,
      takingAt,
      `compensation "${s.step.name}"`,
    );
    await userCode(() => faultPoint('after-perform'));
    output = validateOutput(as, value);
  } catch (error) {
    if (error instanceof StepFailure && error.cause instanceof NotAppliedError) {
      await settleTakenOver(s, undone, key, {
        resolution: `released: the provider refused key "${key}" when compensation "${s.step.name}" (attempt ${s.attempt}) sent it again (${error.cause.message})`,
      });
      throw new ResyncNeeded();
    }
    throw error;
  }
  const recorded = await settleTakenOver(s, undone, key, {
    output,
    resolution: `recorded by compensation "${s.step.name}" (attempt ${s.attempt}), which sent key "${key}" again: the provider dedupes by key, so this is the step's one effect`,
  });
  if (!recorded) throw leaseLost(s.lease, `the record of step "${undone.name}"'s taken-over intent`);
  const outputs = withStoredOutput(s.run.outputs, undone.name, output);
  return STEP_EXECUTORS[s.step.kind]({ ...s, run: { ...s.run, outputs } });
}

/** Records (with `output`) or releases the intent {@link takeOverByKey} holds, fenced by the run's lease. */
async function settleTakenOver(
  s: StepExecution,
  undone: StepDefinition,
  key: string,
  settlement: { readonly output?: Json; readonly resolution: string },
): Promise<boolean> {
  const { rows } = await settleTakenOverStatement(s.lease, s.step, undone, key, settlement).execute(s.db);
  return rows.length === 1;
}

/** The statement of {@link takeOverByKey}'s take-over: fence (and extend the lease), then stamp the open intent as this lease's. */
export function takeOverIntentStatement(
  lease: Lease,
  compensation: StepDefinition,
  undone: StepDefinition,
): RawBuilder<{ fenced: boolean; key: string | null }> {
  assertEffectTransition('intent', 'intent');
  return sql<{ fenced: boolean; key: string | null }>`
    WITH fenced AS (
      ${fenceAtStep(lease, compensation.position)}
    ),
    taken AS (
      UPDATE ledgerflow.step_effect
         SET fencing_token = ${lease.fencingToken}, intent_at = statement_timestamp(), reconcile_after = ${intentHorizon(lease, undone)}
       WHERE workflow_id = ${lease.runId} AND step_name = ${undone.name} AND status = 'intent' AND EXISTS (SELECT 1 FROM fenced)
      RETURNING idempotency_key
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, (SELECT idempotency_key FROM taken LIMIT 1) AS key`;
}

/** The statement of {@link settleTakenOver}. */
export function settleTakenOverStatement(
  lease: Lease,
  compensation: StepDefinition,
  undone: StepDefinition,
  key: string,
  settlement: { readonly output?: Json; readonly resolution: string },
): RawBuilder<{ workflow_id: string }> {
  const recording = settlement.output !== undefined;
  assertEffectTransition('intent', recording ? 'recorded' : 'released');
  return sql<{ workflow_id: string }>`
    UPDATE ledgerflow.step_effect e
       SET status = ${recording ? 'recorded' : 'released'}, reconcile_after = NULL, resolution = ${recordableText(settlement.resolution)},
           effect = COALESCE(${recording ? JSON.stringify(settlement.output) : null}::jsonb, e.effect),
           recorded_at = CASE WHEN ${recording}::boolean THEN statement_timestamp() ELSE e.recorded_at END
      FROM ledgerflow.workflow_run r
     WHERE e.workflow_id = ${lease.runId} AND e.step_name = ${undone.name} AND e.idempotency_key = ${key} AND e.status = 'intent'
       AND e.fencing_token = ${lease.fencingToken}
       AND r.id = e.workflow_id AND r.fencing_token = ${lease.fencingToken} AND r.status = 'running' AND r.current_step = ${compensation.position}
    RETURNING e.workflow_id`;
}

/**
 * The run's deadline passed while it had compensations to run: instead of `cancelled`, it
 * compensates (`compensation = 'failure'`), positioned at its first compensation, due now, the
 * deadline kept as its error. Fenced like every commit of a held run.
 */
export async function compensateOverdue(
  db: Kysely<LedgerflowDatabase>,
  lease: Lease,
  compensateFrom: number,
): Promise<boolean> {
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
