import { DEFAULT_PAYLOAD_LIMITS, fitErrorRecord } from '../limits/payload-limits.js';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import { LeaseLostError, NotAppliedError } from '../errors.js';
import type { EffectStatus, LedgerflowDatabase, RunStatus } from '../store/tables.js';
import { millis } from '../store/millis.js';
import { backoffDelayMs, countsTowardBudget, isNonRetryable } from './retry.js';
import { assertAttemptTransition, assertEffectTransition, assertRunTransition } from '../store/state-machines.js';
import { RUNS_CHANNEL } from '../store/channels.js';
import type { Lease } from './lease.js';
import { recordableText, serializeError, type StepFailure, type SerializedError } from './step-errors.js';

/*
 * The commits of a step that did not succeed: a failed attempt (retry, fail, or park with an
 * open intent), and the end of a step that may not be tried again (`finishExhausted`), which a
 * run taken over from a step that crashed its worker again shares (crash-commits.ts). Each runs
 * in one transaction that first locks the run and checks the fencing token (`lockFencedRun`), so
 * a zombie records nothing.
 */

const lit = (value: string): RawBuilder<unknown> => sql.lit(value);

export type FailureOutcome =
  | { readonly kind: 'retry'; readonly retryAt: Date; readonly failures: number }
  | { readonly kind: 'failed'; readonly failures: number }
  | { readonly kind: 'parked'; readonly reason: string; readonly failures: number }
  /** The step is over and the workflow declares compensations: the run undoes its recorded effects. */
  | { readonly kind: 'compensating'; readonly failures: number }
  /** A compensation is over: the run ends `compensation_failed`, parked for an operator. */
  | { readonly kind: 'compensation_failed'; readonly failures: number };

export interface FailureParams {
  readonly lease: Lease;
  readonly step: StepDefinition;
  readonly attempt: number;
  readonly failure: StepFailure;
  /** True when the step's external handler has `reconcile` (decides park vs release at exhaustion). */
  readonly canReconcile: boolean;
  /** The position of the workflow's first compensation, when a run that fails for good here compensates. */
  readonly compensateFrom?: number | undefined;
  /** The step has a compensation: when the run compensates, that compensation settles the step's open intent (see {@link ExhaustedParams.stepCompensated}). */
  readonly stepCompensated?: boolean;
  readonly random?: () => number;
  /** The error record's limit (`ledgerflow limits`): a longer record is truncated, never refused. */
  readonly maxErrorBytes?: number;
}

/**
 * Records a failed attempt and decides, inside one fenced transaction, what the run does next:
 * retry (`pending`, `run_after = now + backoff`), fail (exhausted, non-retryable, conflict),
 * or — for an `external` step whose intent is still open and whose effect may have happened —
 * park in `needs_reconciliation` rather than declare a failure the provider may contradict.
 *
 * What the failure means for this attempt's own open intent depends on where it failed
 * ({@link StepFailure.phase}):
 *   before-perform, or perform threw NotAppliedError  →  released: the effect did not happen;
 *   after-perform (the provider answered)              →  due for reconciliation at once;
 *   perform threw anything else / timed out            →  left open until its horizon.
 * A retry of a step whose intent stays open and whose provider does not dedupe is scheduled no
 * earlier than that intent's horizon (it would only be rescheduled until then).
 */
export async function commitFailure(db: Kysely<LedgerflowDatabase>, p: FailureParams): Promise<FailureOutcome> {
  const { lease, step, failure } = p;
  const cause = failure.cause;
  const error = failureRecord(p);
  return db.transaction().execute(async (trx) => {
    const run = await lockFencedRun(trx, lease, step.name, 'its failure');
    const intent = await settleOwnIntent(trx, lease, step, p.attempt, failure);
    const failures = run.failures + 1;
    const nonRetryable = isNonRetryable(cause, step.retry);
    const exhausted = failures >= step.retry.maxAttempts;

    if (!nonRetryable && !exhausted) {
      const delayMs = backoffDelayMs(step.retry, failures, p.random);
      // An open intent of a provider that does not dedupe is reconciled first, at its horizon.
      const waitForIntent = intent.open && !step.idempotentByKey;
      const { rows: retried } = await failureRetryStatement({
        lease,
        step,
        attempt: p.attempt,
        error,
        delayMs,
        notBefore: waitForIntent ? intent.reconcileAfter : undefined,
      }).execute(trx);
      return { kind: 'retry', retryAt: retried[0]!.retry_at, failures };
    }

    const why = nonRetryable ? 'non-retryable error' : `attempts exhausted (${failures}/${step.retry.maxAttempts})`;
    const end = await finishExhausted(trx, {
      lease,
      step,
      attempt: p.attempt,
      error,
      why,
      openIntent: intent.open ? run.open_intent : null,
      // A conflict never touches the existing ledger row: nothing is overwritten.
      conflict: cause instanceof Error && cause.name === 'ConflictError',
      canReconcile: p.canReconcile,
      compensateFrom: p.compensateFrom,
      stepCompensated: p.stepCompensated,
    });
    return { ...end, failures };
  });
}

/**
 * The error record {@link commitFailure} writes for the attempt — and for the run, when it fails
 * for good: the serialized cause with the step and the attempt, cut to `maxErrorBytes`. The same
 * for the same params (a local wait's answer is built again from it, run-driver.ts).
 */
export function failureRecord(
  p: Pick<FailureParams, 'step' | 'attempt' | 'failure' | 'maxErrorBytes'>,
): SerializedError {
  return fitErrorRecord<SerializedError>(
    { ...serializeError(p.failure.cause), step: p.step.name, attempt: p.attempt },
    p.maxErrorBytes ?? DEFAULT_PAYLOAD_LIMITS.maxErrorBytes,
  );
}

/**
 * A retry after a failed attempt (inside the failure commit, after {@link lockFencedRunStatement}):
 * the attempt `failed`, the run `pending` until `statement_timestamp() + delayMs` — or, when
 * `notBefore` is given (an open intent's horizon), no earlier than that.
 */
export function failureRetryStatement(p: {
  readonly lease: Lease;
  readonly step: StepDefinition;
  readonly attempt: number;
  readonly error: SerializedError;
  readonly delayMs: number;
  /** `undefined`: no open intent to wait for; `null` is passed through as SQL NULL. */
  readonly notBefore: Date | null | undefined;
}): RawBuilder<{ retry_at: Date }> {
  const { lease, step } = p;
  assertAttemptTransition('running', 'failed');
  assertRunTransition('running', 'pending');
  const retryAt =
    p.notBefore !== undefined
      ? sql`GREATEST(statement_timestamp() + ${millis(p.delayMs)}, ${p.notBefore}::timestamptz)`
      : sql`statement_timestamp() + ${millis(p.delayMs)}`;
  return sql<{ retry_at: Date }>`
        WITH attempt AS (
          UPDATE ledgerflow.step_attempt
             SET status = 'failed', error = ${JSON.stringify(p.error)}::jsonb, finished_at = statement_timestamp(),
                 next_eligible_at = ${retryAt}
           WHERE run_id = ${lease.runId} AND step_name = ${step.name} AND attempt = ${p.attempt} AND status = 'running'
          RETURNING next_eligible_at
        )
        UPDATE ledgerflow.workflow_run
           SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
               run_after = ${retryAt}
         WHERE id = ${lease.runId}
        RETURNING run_after AS retry_at`;
}

/**
 * The failed attempt's own intent (an `external` step), per the failure's phase: released when
 * the effect certainly did not happen, made due at once when the provider answered. Returns
 * whether an intent of the step is still open, and its horizon.
 */
async function settleOwnIntent(
  trx: Kysely<LedgerflowDatabase>,
  lease: Lease,
  step: StepDefinition,
  attempt: number,
  failure: StepFailure,
): Promise<{ readonly open: boolean; readonly reconcileAfter: Date | null }> {
  const { rows } = await settleOwnIntentStatement(lease, step, attempt, failure).execute(trx);
  const open = rows.find((r) => r.status === 'intent');
  return { open: open !== undefined, reconcileAfter: open?.reconcile_after ?? null };
}

/** The statement of {@link settleOwnIntent}: the step's ledger rows, after this attempt's own intent was settled. */
export function settleOwnIntentStatement(
  lease: Lease,
  step: StepDefinition,
  attempt: number,
  failure: StepFailure,
): RawBuilder<{ status: EffectStatus; reconcile_after: Date | null }> {
  const notApplied =
    failure.phase === 'before-perform' || (failure.phase === 'perform' && failure.cause instanceof NotAppliedError);
  const release = step.kind === 'external' && notApplied;
  const dueNow = step.kind === 'external' && failure.phase === 'after-perform';
  if (release) assertEffectTransition('intent', 'released');
  if (dueNow) assertEffectTransition('intent', 'intent');
  const why =
    failure.phase === 'before-perform'
      ? `released: attempt ${attempt} failed before calling perform (${failure.message})`
      : `released: the provider refused the request, NotAppliedError (${failure.message})`;
  return sql<{ status: EffectStatus; reconcile_after: Date | null }>`
    WITH own AS (
      UPDATE ledgerflow.step_effect
         SET status = CASE WHEN ${release}::boolean THEN 'released' ELSE status END,
             resolution = CASE WHEN ${release}::boolean THEN ${recordableText(why)}::text ELSE resolution END,
             reconcile_after = CASE WHEN ${release}::boolean THEN NULL
                                    WHEN ${dueNow}::boolean THEN statement_timestamp()
                                    ELSE reconcile_after END
       WHERE workflow_id = ${lease.runId} AND step_name = ${step.name} AND status = 'intent' AND attempt = ${attempt}
         AND (${release}::boolean OR ${dueNow}::boolean)
      RETURNING idempotency_key, status, reconcile_after
    )
    SELECT COALESCE(o.status, e.status) AS status, COALESCE(o.reconcile_after, e.reconcile_after) AS reconcile_after
      FROM ledgerflow.step_effect e LEFT JOIN own o USING (idempotency_key)
     WHERE e.workflow_id = ${lease.runId} AND e.step_name = ${step.name}`;
}

/**
 * The end of a step that may not be tried again: the run fails — or, when an `external`
 * step's intent is still open and the effect may have happened, it parks in
 * `needs_reconciliation` rather than declare a failure the provider may contradict (a provider
 * that dedupes by key, with no reconcile, gets the intent released instead: the key is reusable).
 * Runs inside the caller's transaction, after it checked the fencing token under a row lock.
 */
export async function finishExhausted(trx: Kysely<LedgerflowDatabase>, p: ExhaustedParams): Promise<ExhaustedOutcome> {
  const { outcome, statement } = finishExhaustedStatement(p);
  await statement.execute(trx);
  return outcome;
}

export interface ExhaustedParams {
  readonly lease: Lease;
  readonly step: StepDefinition;
  /** The `running` attempt to close as failed; `undefined` when none is open. */
  readonly attempt: number | undefined;
  /** The attempt's error, and the run's unless it parks. */
  readonly error: SerializedError;
  /** Why the step is over, for the park reason and released intents. */
  readonly why: string;
  readonly openIntent: string | null;
  readonly conflict: boolean;
  readonly canReconcile: boolean;
  /** The position of the workflow's first compensation, when a run that fails here compensates instead. */
  readonly compensateFrom?: number | undefined;
  /**
   * The step has a compensation. An open intent of an `idempotentByKey` step without reconcile is
   * then NOT released when the run compensates: its compensation takes it over by key (it may have
   * happened, and only a second call with the same key can tell — compensation.ts).
   */
  readonly stepCompensated?: boolean | undefined;
}

export type ExhaustedOutcome =
  | { readonly kind: 'failed' }
  | { readonly kind: 'parked'; readonly reason: string }
  | { readonly kind: 'compensating' }
  | { readonly kind: 'compensation_failed' };

/** What {@link finishExhausted} decides, and its statement. */
export function finishExhaustedStatement(p: ExhaustedParams): {
  readonly outcome: ExhaustedOutcome;
  readonly statement: RawBuilder<unknown>;
} {
  const { lease, step, error } = p;
  let outcome: ExhaustedOutcome = { kind: 'failed' };
  let release: string | undefined;
  if (p.openIntent !== null && !p.conflict) {
    if (step.idempotentByKey && !p.canReconcile) {
      if (p.compensateFrom === undefined || p.stepCompensated !== true) {
        release = `released: ${p.why}; the provider dedupes by key, so a later run may reuse it`;
      }
    } else {
      outcome = {
        kind: 'parked',
        reason:
          `${p.why} on step "${step.name}" while its intent for key "${p.openIntent}" is open: ` +
          `the effect may have happened (last error: ${error.message}); the reconciler will look it up`,
      };
    }
  }
  if (p.attempt !== undefined) assertAttemptTransition('running', 'failed');
  if (release !== undefined) assertEffectTransition('intent', 'released');
  if (outcome.kind === 'failed' && step.compensates !== undefined) outcome = { kind: 'compensation_failed' };
  else if (outcome.kind === 'failed' && p.compensateFrom !== undefined) outcome = { kind: 'compensating' };
  const status: RunStatus = EXHAUSTED_STATUS[outcome.kind];
  assertRunTransition('running', status);
  const runError =
    outcome.kind === 'parked'
      ? {
          name: 'NeedsReconciliation',
          message: outcome.reason,
          step: step.name,
          key: p.openIntent,
          exhausted: true,
          lastError: error,
        }
      : error;
  const statement = sql`
    WITH attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'failed', error = ${JSON.stringify(error)}::jsonb, finished_at = statement_timestamp()
       WHERE run_id = ${lease.runId} AND step_name = ${step.name} AND attempt = ${p.attempt ?? null}::int AND status = 'running'
      RETURNING 1
    ),
    released AS (
      UPDATE ledgerflow.step_effect SET status = 'released', resolution = ${release ?? null}::text
       WHERE workflow_id = ${lease.runId} AND step_name = ${step.name} AND status = 'intent' AND ${release !== undefined}::boolean
      RETURNING 1
    )
    UPDATE ledgerflow.workflow_run
       SET status = ${lit(status)}, lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
           error = ${JSON.stringify(runError)}::jsonb,
           finished_at = ${status === 'failed' || status === 'compensation_failed' ? sql`statement_timestamp()` : sql`NULL`}${
             outcome.kind === 'compensating'
               ? sql`,
           compensation = 'failure', current_step = ${p.compensateFrom!}::int, run_after = statement_timestamp()`
               : sql``
           }
     WHERE id = ${lease.runId}${
       // Due now for its first compensation: announced like every run made due (DESIGN.md "NOTIFY").
       outcome.kind === 'compensating'
         ? sql`
    RETURNING pg_notify(${RUNS_CHANNEL}, id::text)`
         : sql``
     }`;
  return { outcome, statement };
}

/** The run's status at the end of a step that may not be tried again (`compensating`: pending at the first compensation). */
const EXHAUSTED_STATUS: Readonly<Record<ExhaustedOutcome['kind'], RunStatus>> = {
  failed: 'failed',
  parked: 'needs_reconciliation',
  compensating: 'pending',
  compensation_failed: 'compensation_failed',
};

/**
 * Locks the run row inside `trx` and checks the lease is still ours: the first statement of
 * every failure-path commit. Returns the step's failed-attempt count and its open intent's key.
 */
export async function lockFencedRun(
  trx: Kysely<LedgerflowDatabase>,
  lease: Lease,
  stepName: string,
  what: string,
): Promise<{ readonly failures: number; readonly open_intent: string | null }> {
  const { rows } = await lockFencedRunStatement(lease, stepName).execute(trx);
  const run = rows[0];
  if (run === undefined || run.fencing_token !== lease.fencingToken || run.status !== 'running') {
    throw new LeaseLostError(`Lease on run ${lease.runId} lost before ${what} could be recorded.`);
  }
  return run;
}

/** The statement of {@link lockFencedRun}. */
export function lockFencedRunStatement(
  lease: Lease,
  stepName: string,
): RawBuilder<{ fencing_token: number; status: RunStatus; failures: number; open_intent: string | null }> {
  return sql<{ fencing_token: number; status: RunStatus; failures: number; open_intent: string | null }>`
    SELECT r.fencing_token, r.status,
           (SELECT count(*) FROM ledgerflow.step_attempt a
             WHERE a.run_id = r.id AND a.step_name = ${stepName} AND a.status = 'failed'
               AND ${countsTowardBudget('a', 'r')})::int AS failures,
           (SELECT e.idempotency_key FROM ledgerflow.step_effect e
             WHERE e.workflow_id = r.id AND e.step_name = ${stepName} AND e.status = 'intent') AS open_intent
      FROM ledgerflow.workflow_run r
     WHERE r.id = ${lease.runId}
       FOR NO KEY UPDATE OF r`;
}
