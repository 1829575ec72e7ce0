/*
 * The `external` step kind: the intent protocol (intent commit, perform, result commit), and what
 * an intent found open decides — take it over by key, ask `reconcile` once its horizon passed,
 * or park the run. Its ledger row moves `(none)/released -> intent -> recorded | released`, or stays
 * `intent` (re-taken, or left for the reconciler: the run `needs_reconciliation`); see
 * {@link executeExternal}.
 */
import type { PerformContext, ReconcileContext, ReconcileOutcome } from '../../contracts/handler-types.js';
import { faultPoint } from '../../faults/fault-points.js';
import type { Json } from '../../store/tables.js';
import {
  matchExisting,
  openIntent,
  retakeIntent,
  type EffectClaim,
  type EffectRow,
  type OpenedIntent,
} from '../ledger.js';
import { commitYield } from '../yield-commits.js';
import { leaseLost } from '../lease.js';
import { resultCommit, type ResultEffect } from '../result-commit.js';
import { PerformTimeoutError, ResyncNeeded, StepFailure, userCode } from '../step-errors.js';
import { isConnectionError } from '../../store/connection-errors.js';
import {
  bounded,
  commitKnowingOutcome,
  effectClaim,
  handlerContext,
  validateOutput,
  type StepExecution,
  type StepExecutor,
  type StepOutcome,
} from './step-execution.js';

/** The handler of an `external` step (or compensation). */
export interface ExternalHandler {
  perform(ctx: PerformContext<unknown, unknown>): Promise<unknown>;
  reconcile?(ctx: ReconcileContext<unknown, unknown>): Promise<ReconcileOutcome<unknown>>;
}

/**
 * `external`: the intent protocol.
 *   1. intent commit (one statement): ledger row `intent` with key, request hash, attempt, token
 *      and its horizon (`reconcile_after` = now + lease + perform timeout, database time) — or
 *      none of its own when the commit that moved the run to this step wrote that row
 *      (`StepExecution.intentOpened`);
 *   2. `perform({ key, signal })`, bounded by `performTimeoutMs`;
 *   3. result commit (one statement): ledger `recorded`, step result, attempt, transition.
 *
 * A perform that did not return has an UNKNOWN outcome — whatever it threw, unless it threw a
 * `NotAppliedError` (the provider refused it): the request may have been sent and may still be
 * applied. Its intent stays open (see `commitFailure` for what each failure phase does to it).
 * An intent found already there is never performed again blindly: `idempotentByKey` steps take
 * it over (same key; the provider dedupes); otherwise, once its horizon has passed, the step's
 * `reconcile` decides — found: record it; not found: perform again with the same key; unknown:
 * park the run in `needs_reconciliation`. Before the horizon, the run is rescheduled to it.
 */
export const executeExternal: StepExecutor = async (s) => {
  const handler = s.workflow.handler(s.step.name) as ExternalHandler;
  // The commit that moved the run here wrote this attempt's intent (result-commit.ts NextIntent):
  // step 1 is done, under the same rules, and perform's lease window counts from that commit.
  const earlier = s.intentOpened;
  if (earlier !== undefined) {
    s.trace.keyed(earlier.claim.key);
    return performAndRecord(s, handler, earlier.claim, earlier.committingAt);
  }
  const claim = await effectClaim(s);
  const committingAt = performance.now();
  let opened: OpenedIntent;
  try {
    opened = await openIntent(s.db, s.lease, s.step, claim);
  } catch (error) {
    // Whether the intent committed is unknown: re-read. If it did, the intent is found as an
    // earlier one and handled by the rules above — never performed on the assumption it failed.
    if (isConnectionError(error)) {
      s.onUnknownOutcome(error);
      throw new ResyncNeeded();
    }
    throw error;
  }
  if (!opened.fenced) throw leaseLost(s.lease, 'the intent commit');
  if (opened.owned) return performAndRecord(s, handler, claim, committingAt);
  if (opened.existing.length === 0) throw new ResyncNeeded();

  const row = await userCode(() => matchExisting(opened.existing, s.step, claim, s.run.id));
  if (row.status === 'recorded') return recordResult(s, claim, row.effect, { key: claim.key, mode: 'reference' }, true);
  if (row.status !== 'intent') throw new ResyncNeeded();
  if (!opened.due) {
    const until = opened.dueAt ?? new Date(0);
    const reason =
      `attempt ${row.attempt} left an intent for key "${claim.key}" at ${row.intent_at} whose outcome is unknown (its perform may ` +
      'still be in flight); it is reconciled once its horizon (intent + lease + perform timeout) has passed';
    await yieldRun(s, { kind: 'reschedule', until, reason });
    return { kind: 'rescheduled', until, reason };
  }
  return reconcileIntent(s, handler, claim, row);
};

async function reconcileIntent(
  s: StepExecution,
  handler: ExternalHandler,
  claim: EffectClaim,
  row: EffectRow,
): Promise<StepOutcome> {
  if (typeof handler.reconcile !== 'function') {
    return park(
      s,
      claim,
      row,
      `intent for key "${claim.key}" (attempt ${row.attempt}) has an unknown outcome and the step has no reconcile`,
    );
  }
  const reconcile = handler.reconcile.bind(handler);
  const outcome = await userCode(() =>
    s.trace.reconcile(claim.key, row.attempt, () =>
      reconcile({
        ...handlerContext(s),
        key: claim.key,
        intent: { attempt: row.attempt, intentAt: new Date(row.intent_at), requestHash: row.request_hash },
      }),
    ),
  );
  switch (outcome?.status) {
    case 'found':
      return recordResult(s, claim, validateOutput(s, outcome.output), {
        key: claim.key,
        mode: 'record-intent',
        attempt: row.attempt,
        resolution: `found by reconcile in attempt ${s.attempt}`,
      });
    case 'not_found': {
      const retakingAt = performance.now();
      const retaken = await retakeIntent(s.db, s.lease, s.step, claim, row.attempt);
      if (!retaken.fenced) throw leaseLost(s.lease, 'the intent re-take');
      if (!retaken.retaken) throw new ResyncNeeded();
      return performAndRecord(s, handler, claim, retakingAt);
    }
    case 'unknown':
      return park(s, claim, row, `reconcile could not tell whether key "${claim.key}" was applied: ${outcome.reason}`);
    default:
      throw new StepFailure(
        new TypeError(
          `reconcile of step "${s.step.name}" must return found(output), notFound() or unknownOutcome(reason).`,
        ),
      );
  }
}

/**
 * Steps 2 and 3. `committingAt` is when this worker sent the commit that made it the intent's
 * owner: perform must *start* within one lease of it (measured locally, as a duration), because
 * the intent's horizon counts one lease for that. A worker that stalled longer (GC pause, hang)
 * leaves the intent to the reconciler instead. This local check right before the call is the
 * fence for the call itself: a database read would only move the question to after the read.
 */
async function performAndRecord(
  s: StepExecution,
  handler: ExternalHandler,
  claim: EffectClaim,
  committingAt: number,
): Promise<StepOutcome> {
  const value = await performWithinLease(s, handler, claim.key, committingAt);
  let output: Json;
  try {
    await userCode(() => faultPoint('after-perform'));
    output = validateOutput(s, value);
    await userCode(() => faultPoint('before-result-commit'));
  } catch (error) {
    // The provider answered: the effect happened and only its recording failed.
    throw error instanceof StepFailure ? new StepFailure(error.cause, 'after-perform') : error;
  }
  return recordResult(s, claim, output, { key: claim.key, mode: 'record-intent', attempt: s.attempt });
}

/**
 * Step 2 alone: `s.step`'s `perform` under `key`, started only within one lease of `committingAt`
 * (see {@link performAndRecord}) and bounded by its `performTimeoutMs`. `by` names who calls it
 * when that is not the step's own attempt (a compensation taking its intent over).
 */
export async function performWithinLease(
  s: StepExecution,
  handler: ExternalHandler,
  key: string,
  committingAt: number,
  by?: string,
): Promise<unknown> {
  await userCode(() => faultPoint('after-intent-commit'), 'before-perform');
  if (s.signal.aborted || performance.now() - committingAt >= s.lease.leaseMs) {
    const what = by === undefined ? 'perform' : `perform of step "${s.step.name}" by ${by}`;
    throw leaseLost(s.lease, `${what} (not started: the lease may have passed to another worker)`);
  }
  const perform = handler.perform.bind(handler);
  return s.trace.perform(key, () =>
    bounded(
      s,
      s.step.performTimeoutMs,
      () =>
        new PerformTimeoutError(
          `perform of step "${s.step.name}" (key "${key}")${by === undefined ? '' : `, taken over by ${by},`} did not finish within ${s.step.performTimeoutMs} ms; its outcome is unknown`,
        ),
      'perform',
      (signal) => perform(handlerContext(s, signal, { key })),
    ),
  );
}

/** Step 3: the result commit. */
async function recordResult(
  s: StepExecution,
  _claim: EffectClaim,
  output: Json,
  effect: ResultEffect,
  reused = false,
): Promise<StepOutcome> {
  const commit = resultCommit(s, output, effect);
  const result = await commitKnowingOutcome(s, () => s.commits.advance(commit), { retry: true });
  if (!result.fenced) throw leaseLost(s.lease, 'the result commit');
  return {
    kind: 'advanced',
    output,
    continuation: commit.continuation.kind,
    nextAttempt: result.nextAttempt,
    reused,
    claimed: result.claimed,
    overdue: result.overdue,
  };
}

/** The intent's outcome stays unknown after this attempt asked (or could not ask): park, and back the next lookup off. */
async function park(s: StepExecution, claim: EffectClaim, row: EffectRow, reason: string): Promise<StepOutcome> {
  await yieldRun(s, { kind: 'park', reason, key: claim.key, lookups: (row.reconcile_attempts ?? 0) + 1 });
  return { kind: 'parked', reason };
}

async function yieldRun(s: StepExecution, to: Parameters<typeof commitYield>[1]['to']): Promise<void> {
  const fenced = await commitKnowingOutcome(
    s,
    () => commitYield(s.db, { lease: s.lease, step: s.step, attempt: s.attempt, to }),
    {
      retry: true,
    },
  );
  if (!fenced) throw leaseLost(s.lease, 'the reschedule/park commit');
}
