import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import { LeaseLostError, NotAppliedError } from '../errors.js';
import type { EffectStatus, Json, LedgerflowDatabase, RunStatus } from '../store/tables.js';
import { claimParts, millis, toLeasedRun, type ClaimOptions, type LeasedRun, type LeasedRunRow } from './claim.js';
import type { WorkflowRegistry } from './registry.js';
import { backoffDelayMs, crashLimit, isNonRetryable, reconcileBackoffMs } from './retry.js';
import { assertAttemptTransition, assertEffectTransition, assertRunTransition } from './state-machines.js';
import { recordableText, serializeError, StepFailure, type SerializedError } from './step-errors.js';

/**
 * Every write that changes a run. Each is fenced: it changes the run only
 * `WHERE id = $run AND fencing_token = $token AND status = 'running'`, and every other write of
 * the commit is conditioned on that row having been changed, so a worker whose token moved on
 * (a zombie) changes nothing. Where possible a commit is ONE statement (data-modifying CTEs):
 * one round trip, atomic without BEGIN/COMMIT.
 */
export interface Lease {
  readonly runId: string;
  readonly fencingToken: number;
  readonly workerId: string;
  readonly leaseMs: number;
}

/** What happens to the run after its step is committed. */
export type Continuation =
  /** Keep the lease and open the next step's attempt in the same commit. */
  | { readonly kind: 'hold'; readonly nextStep: string }
  /** Give the run back as `pending`, due now (worker stopping; reconciler). */
  | { readonly kind: 'release' }
  /**
   * That was the last step: `completed`, with the outputs of all steps as the run's output.
   * With `claimNext`, the same commit also claims pending runs for the slot it frees (fused
   * claim: one commit instead of two per run while there is a backlog).
   */
  | { readonly kind: 'complete'; readonly runOutput: Json; readonly claimNext?: FusedClaim };

/** A claim that rides on a step's completion commit; see {@link advanceRun}. */
export interface FusedClaim {
  readonly registry: WorkflowRegistry;
  readonly options: ClaimOptions;
}

export interface AdvanceParams {
  readonly lease: Lease;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly step: StepDefinition;
  /** The worker's `running` attempt to close as succeeded; `undefined` for the reconciler. */
  readonly attempt: number | undefined;
  /** The attempt the result is attributed to (the performing attempt for a reconciled effect). */
  readonly resultAttempt: number;
  readonly output: Json;
  /** Ledger row the result points at (effect kinds only), and what this commit does to it. */
  readonly effect?: ResultEffect;
  readonly continuation: Continuation;
}

/** What a result commit needs from the attempt that makes it (a `StepExecution` has all of it). */
export interface ResultCommitSource {
  readonly lease: Lease;
  readonly run: { readonly workflowName: string; readonly workflowVersion: number };
  readonly step: StepDefinition;
  /** The attempt to close as succeeded. */
  readonly attempt: number;
  /** What the commit does with the run, given the output; asked once per result commit. */
  continuation(output: Json): Continuation;
}

/**
 * The {@link AdvanceParams} of an attempt's result commit, so that each executor states only
 * what differs (the output and the ledger effect): the attempt's lease, run, step and attempt,
 * the result attributed to the attempt that performed the effect — the intent's writer for
 * `record-intent`, this attempt otherwise — and the continuation for `output`, asked for once
 * here (it may reserve a fused claim): read it back as `.continuation`.
 */
export function resultCommit(s: ResultCommitSource, output: Json, effect?: ResultEffect): AdvanceParams {
  return {
    lease: s.lease,
    workflowName: s.run.workflowName,
    workflowVersion: s.run.workflowVersion,
    step: s.step,
    attempt: s.attempt,
    resultAttempt: effect?.mode === 'record-intent' ? effect.attempt : s.attempt,
    output,
    ...(effect === undefined ? {} : { effect }),
    continuation: s.continuation(output),
  };
}

/** The ledger row a step's result points at, and what the result commit does to it. */
export type ResultEffect =
  /** The row is already `recorded` (its output is being reused): only referenced. */
  | { readonly key: string; readonly mode: 'reference' }
  /**
   * A `transactional` step whose handler sent nothing through `ctx.tx`: the row is inserted,
   * `recorded` with the output, in this same statement — and the run moves only if the step has
   * no ledger row yet; if it has one, nothing changes and {@link AdvanceResult.effectExists} says so.
   */
  | { readonly key: string; readonly mode: 'insert-recorded'; readonly attempt: number; readonly requestHash: string }
  /** A `transactional` step's row, inserted `recorded` by this same transaction, gets its output. */
  | { readonly key: string; readonly mode: 'fill-recorded'; readonly attempt: number }
  /** An `external` intent written by `attempt` becomes `recorded` (perform returned, or reconcile found it). */
  | { readonly key: string; readonly mode: 'record-intent'; readonly attempt: number; readonly resolution?: string };

export interface AdvanceResult {
  readonly fenced: boolean;
  /** The next step's attempt, opened by this commit (`hold` only). */
  readonly nextAttempt: number | null;
  /** Runs the fused claim took (`complete` with `claimNext` only; otherwise `undefined`). */
  readonly claimed: readonly LeasedRun[] | undefined;
  /** With `insert-recorded` only: the step already had a ledger row, so this statement changed nothing. */
  readonly effectExists?: boolean;
}

const lit = (value: string): RawBuilder<unknown> => sql.lit(value);

/**
 * Step result + attempt succeeded + ledger row (recorded) + run transition, in ONE statement.
 * The step_result foreign key makes the database itself refuse an effect step's result without
 * a `recorded` ledger row under its key. A fused claim (`complete` with `claimNext`) adds the
 * claim's CTEs (prefixed `fused_`, pending runs only) guarded by this commit being fenced in:
 * a zombie's rolled-back completion claims nothing.
 */
export async function advanceRun(db: Kysely<LedgerflowDatabase>, p: AdvanceParams): Promise<AdvanceResult> {
  const { rows } = await advanceRunStatement(p).execute(db);
  const row = rows[0];
  const fused = p.continuation.kind === 'complete' && p.continuation.claimNext !== undefined;
  return {
    fenced: row?.fenced === true,
    nextAttempt: row?.next_attempt ?? null,
    claimed: fused ? (row?.claimed ?? []).map(toLeasedRun) : undefined,
    ...(p.effect?.mode === 'insert-recorded' ? { effectExists: row?.effect_exists === true } : {}),
  };
}

/** The row {@link advanceRunStatement} returns. */
export interface AdvanceRow {
  fenced: boolean;
  next_attempt: number | null;
  claimed: LeasedRunRow[] | null;
  effect_exists: boolean;
}

/** The statement of {@link advanceRun}; checks the transitions it makes before building it. */
export function advanceRunStatement(p: AdvanceParams): RawBuilder<AdvanceRow> {
  const target: RunStatus = p.continuation.kind === 'hold' ? 'running' : p.continuation.kind === 'release' ? 'pending' : 'completed';
  assertRunTransition('running', target);
  if (p.attempt !== undefined) assertAttemptTransition('running', 'succeeded');
  if (p.continuation.kind === 'hold') assertAttemptTransition('none', 'running');
  const effect = p.effect;
  if (effect?.mode === 'record-intent') assertEffectTransition('intent', 'recorded');
  // fill-recorded completes the row this same transaction inserted (openTransactionalEffect):
  // seen from outside, the commit takes the step's ledger row from none to recorded.
  if (effect?.mode === 'insert-recorded' || effect?.mode === 'fill-recorded') assertEffectTransition('none', 'recorded');
  if ((effect === undefined) !== (p.step.kind === 'step') || (effect?.mode === 'insert-recorded' && p.step.kind !== 'transactional')) {
    throw new TypeError(`advanceRun: ledger effect ${effect?.mode ?? 'none'} does not fit ${p.step.kind} step "${p.step.name}".`);
  }
  const insert = effect?.mode === 'insert-recorded' ? effect : undefined;
  const { lease, step } = p;
  const outputJson = JSON.stringify(p.output);
  const runSet =
    p.continuation.kind === 'hold'
      ? sql`status = 'running', lease_expires_at = statement_timestamp() + ${millis(lease.leaseMs)}`
      : p.continuation.kind === 'release'
        ? sql`status = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = statement_timestamp()`
        : sql`status = 'completed', lease_owner = NULL, lease_expires_at = NULL, finished_at = statement_timestamp(),
              output = ${JSON.stringify(p.continuation.runOutput)}::jsonb`;
  // Seen in the statement's snapshot, so it never sees the row this statement inserts.
  const stepHasEffect = sql`EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = ${lease.runId} AND e.step_name = ${step.name})`;
  const effectCte = effect === undefined ? sql`` : ledgerCte(effect, lease, step.name, outputJson);
  const attemptCte =
    p.attempt !== undefined
      ? sql`, finished AS (
          UPDATE ledgerflow.step_attempt SET status = 'succeeded', finished_at = statement_timestamp()
           WHERE run_id = ${lease.runId} AND step_name = ${step.name} AND attempt = ${p.attempt} AND status = 'running'
             AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1)`
      : sql``;
  const nextCte =
    p.continuation.kind === 'hold'
      ? sql`, next AS (
          INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
          SELECT f.id, ${p.continuation.nextStep},
                 1 + COALESCE((SELECT max(a.attempt) FROM ledgerflow.step_attempt a
                                WHERE a.run_id = f.id AND a.step_name = ${p.continuation.nextStep}), 0),
                 'running', ${lease.fencingToken}, ${lease.workerId}, statement_timestamp()
            FROM fenced f
          RETURNING attempt)`
      : sql``;
  const claimNext = p.continuation.kind === 'complete' ? p.continuation.claimNext : undefined;
  const fused =
    claimNext === undefined
      ? undefined
      : claimParts(claimNext.registry, claimNext.options, {
          prefix: 'fused_',
          guard: sql`EXISTS (SELECT 1 FROM fenced)`,
          takeovers: false,
        });
  return sql<AdvanceRow>`
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = current_step + 1, updated_at = statement_timestamp(), error = NULL, ${runSet}
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
         AND current_step = ${step.position} ${insert !== undefined ? sql`AND NOT ${stepHasEffect}` : sql``}
      RETURNING id
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
      SELECT id, ${p.workflowName}, ${p.workflowVersion}, ${step.name}, ${step.kind}, ${outputJson}::jsonb,
             ${p.resultAttempt}, ${effect?.key ?? null}::text, ${effect === undefined ? null : 'recorded'}::text
        FROM fenced
      RETURNING 1
    )
    ${effectCte} ${attemptCte} ${nextCte} ${fused === undefined ? sql`` : sql`, ${fused.ctes}`}
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           ${p.continuation.kind === 'hold' ? sql`(SELECT attempt FROM next)` : sql`NULL::int`} AS next_attempt,
           ${fused === undefined ? sql`NULL::jsonb` : sql`(SELECT COALESCE(jsonb_agg(f), '[]'::jsonb) FROM (${fused.select}) f)`} AS claimed,
           ${insert !== undefined ? stepHasEffect : sql`false`} AS effect_exists`;
}

/** The ledger CTE of a result commit, per {@link ResultEffect} mode (`reference` writes nothing). */
function ledgerCte(effect: ResultEffect, lease: Lease, stepName: string, outputJson: string): RawBuilder<unknown> {
  switch (effect.mode) {
    case 'reference':
      return sql``;
    case 'insert-recorded':
      return sql`, effect AS (
          INSERT INTO ledgerflow.step_effect
                 (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
          SELECT id, ${stepName}, ${effect.key}, ${outputJson}::jsonb, 'recorded', 'transactional', ${effect.requestHash},
                 ${effect.attempt}, ${lease.fencingToken}, statement_timestamp()
            FROM fenced
          RETURNING 1)`;
    case 'fill-recorded':
    case 'record-intent': {
      const from = effect.mode === 'fill-recorded' ? 'recorded' : 'intent';
      const resolution = effect.mode === 'record-intent' ? (effect.resolution ?? null) : null;
      return sql`, effect AS (
          UPDATE ledgerflow.step_effect
             SET status = 'recorded', effect = ${outputJson}::jsonb, recorded_at = COALESCE(recorded_at, statement_timestamp()),
                 resolution = COALESCE(${resolution}::text, resolution)
           WHERE workflow_id = ${lease.runId} AND step_name = ${stepName} AND idempotency_key = ${effect.key}
             AND status = ${lit(from)} AND attempt = ${effect.attempt}
             AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1)`;
    }
  }
}

export type FailureOutcome =
  | { readonly kind: 'retry'; readonly retryAt: Date; readonly failures: number }
  | { readonly kind: 'failed'; readonly failures: number }
  | { readonly kind: 'parked'; readonly reason: string; readonly failures: number };

export interface FailureParams {
  readonly lease: Lease;
  readonly step: StepDefinition;
  readonly attempt: number;
  readonly failure: StepFailure;
  /** True when the step's external handler has `reconcile` (decides park vs release at exhaustion). */
  readonly canReconcile: boolean;
  readonly random?: () => number;
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
  const error: SerializedError = { ...serializeError(cause), step: step.name, attempt: p.attempt };
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
    });
    return end.kind === 'parked' ? { ...end, failures } : { kind: 'failed', failures };
  });
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
  const notApplied = failure.phase === 'before-perform' || (failure.phase === 'perform' && failure.cause instanceof NotAppliedError);
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
async function finishExhausted(trx: Kysely<LedgerflowDatabase>, p: ExhaustedParams): Promise<ExhaustedOutcome> {
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
}

export type ExhaustedOutcome = { readonly kind: 'failed' } | { readonly kind: 'parked'; readonly reason: string };

/** What {@link finishExhausted} decides, and its statement. */
export function finishExhaustedStatement(p: ExhaustedParams): { readonly outcome: ExhaustedOutcome; readonly statement: RawBuilder<unknown> } {
  const { lease, step, error } = p;
  let outcome: ExhaustedOutcome = { kind: 'failed' };
  let release: string | undefined;
  if (p.openIntent !== null && !p.conflict) {
    if (step.idempotentByKey && !p.canReconcile) {
      release = `released: ${p.why}; the provider dedupes by key, so a later run may reuse it`;
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
  const status: RunStatus = outcome.kind === 'parked' ? 'needs_reconciliation' : 'failed';
  assertRunTransition('running', status);
  const runError =
    outcome.kind === 'parked'
      ? { name: 'NeedsReconciliation', message: outcome.reason, step: step.name, key: p.openIntent, exhausted: true, lastError: error }
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
           finished_at = ${status === 'failed' ? sql`statement_timestamp()` : sql`NULL`}
     WHERE id = ${lease.runId}`;
  return { outcome, statement };
}

/**
 * Locks the run row inside `trx` and checks the lease is still ours: the first statement of
 * every failure-path commit. Returns the step's failed-attempt count and its open intent's key.
 */
async function lockFencedRun(
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
             WHERE a.run_id = r.id AND a.step_name = ${stepName} AND a.status = 'failed')::int AS failures,
           (SELECT e.idempotency_key FROM ledgerflow.step_effect e
             WHERE e.workflow_id = r.id AND e.step_name = ${stepName} AND e.status = 'intent') AS open_intent
      FROM ledgerflow.workflow_run r
     WHERE r.id = ${lease.runId}
       FOR NO KEY UPDATE OF r`;
}

export type CrashOutcome =
  | { readonly kind: 'retry'; readonly retryAt: Date; readonly crashes: number }
  | { readonly kind: 'failed'; readonly crashes: number }
  | { readonly kind: 'parked'; readonly reason: string; readonly crashes: number };

export interface CrashParams {
  readonly lease: Lease;
  readonly step: StepDefinition;
  /** `LeaseExpired` attempts of the step, the one the claim just closed included. */
  readonly crashes: number;
  readonly canReconcile: boolean;
  readonly random?: () => number;
}

/**
 * A run taken over from a step that crashed its worker again (poison step): the claim opened
 * no attempt. Below {@link crashLimit} the run goes back to `pending` after a backoff (the
 * step's own policy, counted in crashes); at the limit the step is over — the run fails with
 * an error naming the crashes, or parks if an `external` intent is open (as for exhausted
 * attempts). The abandoned attempts stay in the history with their `LeaseExpired` errors.
 * One fenced transaction.
 */
export async function commitCrash(db: Kysely<LedgerflowDatabase>, p: CrashParams): Promise<CrashOutcome> {
  const { lease, step, crashes } = p;
  const limit = crashLimit(step.retry);
  return db.transaction().execute(async (trx) => {
    const run = await lockFencedRun(trx, lease, step.name, 'its crash');
    if (crashes < limit) {
      // The first crash waited one lease before anyone took over; later ones back off further.
      const delayMs = backoffDelayMs(step.retry, crashes - 1, p.random);
      const { rows: retried } = await crashRetryStatement(lease, delayMs).execute(trx);
      return { kind: 'retry', retryAt: retried[0]!.retry_at, crashes };
    }
    const error: SerializedError = {
      name: 'StepCrashedWorker',
      message:
        `step "${step.name}" crashed its worker ${crashes} times: each time the lease expired before the attempt finished ` +
        '(the worker process died, hung, or lost the database); it is not tried again',
      step: step.name,
      crashes,
    };
    const end = await finishExhausted(trx, {
      lease,
      step,
      attempt: undefined,
      error,
      why: `crash limit reached (${crashes}/${limit})`,
      openIntent: run.open_intent,
      conflict: false,
      canReconcile: p.canReconcile,
    });
    return { ...end, crashes };
  });
}

/** A backoff after a repeated crash (inside the crash commit): the run `pending` until `statement_timestamp() + delayMs`. */
export function crashRetryStatement(lease: Lease, delayMs: number): RawBuilder<{ retry_at: Date }> {
  assertRunTransition('running', 'pending');
  return sql<{ retry_at: Date }>`
        UPDATE ledgerflow.workflow_run
           SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
               run_after = statement_timestamp() + ${millis(delayMs)}
         WHERE id = ${lease.runId}
        RETURNING run_after AS retry_at`;
}

/**
 * Closes the attempt as `abandoned` (it decided nothing about the step) and moves the run on
 * without a result: parked for a human or the reconciler, or rescheduled until an earlier
 * attempt's intent is old enough to reconcile. One fenced statement.
 */
export async function commitYield(db: Kysely<LedgerflowDatabase>, p: YieldParams): Promise<boolean> {
  const { rows } = await commitYieldStatement(p).execute(db);
  return rows[0]?.fenced === true;
}

export interface YieldParams {
  readonly lease: Lease;
  readonly step: StepDefinition;
  readonly attempt: number;
  readonly to: { readonly kind: 'park'; readonly reason: string; readonly key: string } | { readonly kind: 'reschedule'; readonly until: Date; readonly reason: string };
}

/** The statement of {@link commitYield}. */
export function commitYieldStatement(p: YieldParams): RawBuilder<{ fenced: boolean }> {
  const { lease, step } = p;
  const status: RunStatus = p.to.kind === 'park' ? 'needs_reconciliation' : 'pending';
  assertRunTransition('running', status);
  assertAttemptTransition('running', 'abandoned');
  if (p.to.kind === 'park') assertEffectTransition('intent', 'intent');
  const attemptError =
    p.to.kind === 'park'
      ? { name: 'NeedsReconciliation', message: p.to.reason }
      : { name: 'AwaitingIntent', message: p.to.reason };
  const runSet =
    p.to.kind === 'park'
      ? sql`status = 'needs_reconciliation',
            error = ${JSON.stringify({ name: 'NeedsReconciliation', message: p.to.reason, step: step.name, key: p.to.key, exhausted: false })}::jsonb`
      : sql`status = 'pending', run_after = ${p.to.until}::timestamptz`;
  return sql<{ fenced: boolean }>`
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(), ${runSet}
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
      RETURNING id
    ),
    attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = statement_timestamp(), error = ${JSON.stringify(attemptError)}::jsonb,
             next_eligible_at = ${p.to.kind === 'reschedule' ? p.to.until : null}::timestamptz
       WHERE run_id = ${lease.runId} AND step_name = ${step.name} AND attempt = ${p.attempt} AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )${
      p.to.kind === 'park'
        ? sql`,
    asked AS (
      -- This attempt asked the provider and it could not tell: the next lookup waits a backoff.
      UPDATE ledgerflow.step_effect
         SET reconcile_attempts = reconcile_attempts + 1,
             reconcile_after = statement_timestamp() + ${millis(reconcileBackoffMs(1))} * power(2, LEAST(reconcile_attempts, 7)),
             resolution = ${recordableText(`parked: ${p.to.reason}`)}
       WHERE workflow_id = ${lease.runId} AND step_name = ${step.name} AND idempotency_key = ${p.to.key} AND status = 'intent'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )`
        : sql``
    }
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced`;
}

export type CommitState = 'committed' | 'not_committed' | 'lost';

/**
 * After a commit whose outcome is unknown: every commit of a step closes its attempt, so the
 * attempt row tells whether it happened. A moved token means someone else owns the run now.
 */
export async function attemptCommitState(
  db: Kysely<LedgerflowDatabase>,
  lease: Lease,
  stepName: string,
  attempt: number,
): Promise<CommitState> {
  const { rows } = await attemptCommitStateStatement(lease, stepName, attempt).execute(db);
  const row = rows[0];
  if (row === undefined || row.fencing_token !== lease.fencingToken) return 'lost';
  return row.attempt_status === 'running' ? 'not_committed' : 'committed';
}

/** The read of {@link attemptCommitState}. */
export function attemptCommitStateStatement(
  lease: Lease,
  stepName: string,
  attempt: number,
): RawBuilder<{ fencing_token: number; attempt_status: string | null }> {
  return sql<{ fencing_token: number; attempt_status: string | null }>`
    SELECT r.fencing_token, a.status AS attempt_status
      FROM ledgerflow.workflow_run r
      LEFT JOIN ledgerflow.step_attempt a ON a.run_id = r.id AND a.step_name = ${stepName} AND a.attempt = ${attempt}
     WHERE r.id = ${lease.runId}`;
}

/** Used where a commit's fenced check found nothing: the run is no longer ours. */
export function leaseLost(lease: Lease, what: string): LeaseLostError {
  return new LeaseLostError(
    `Run ${lease.runId}: fencing token ${lease.fencingToken} is no longer current; ${what} was rolled back.`,
  );
}
