import { sql, type RawBuilder } from 'kysely';
import type { ResolvedRetryPolicy } from '../../dsl/retry-policy.js';
import {
  ConflictError,
  NonRetryableError,
  NotAppliedError,
  PayloadTooLargeError,
  recordImmutableError,
} from '../errors.js';
import { exponentialBackoffMs } from '../backoff.js';

/**
 * Retry decisions. The delay is a duration; the worker adds it to the database clock
 * (`statement_timestamp() + delay`), so a skewed worker clock cannot make a run eligible early or late.
 */
export function isNonRetryable(error: unknown, policy: ResolvedRetryPolicy): boolean {
  if (error instanceof NonRetryableError || error instanceof ConflictError || error instanceof PayloadTooLargeError)
    return true;
  // The database refused to rewrite recorded history (core 0012): another attempt is refused alike.
  if (recordImmutableError(error) !== undefined) return true;
  if (error instanceof NotAppliedError) return !error.retryable;
  return policy.nonRetryable.some((errorClass) => error instanceof errorClass);
}

/**
 * Delay before the next attempt after `failures` failed attempts (1 after the first failure):
 * `initialDelayMs * backoffFactor^(failures-1)`, capped at `maxDelayMs`, of which the fraction
 * `jitter` is randomised downwards so that runs failing together do not retry together.
 */
export function backoffDelayMs(
  policy: ResolvedRetryPolicy,
  failures: number,
  random: () => number = Math.random,
): number {
  const exponential = policy.initialDelayMs * policy.backoffFactor ** Math.max(0, failures - 1);
  const capped = Math.min(policy.maxDelayMs, exponential);
  return Math.round(capped * (1 - policy.jitter * random()));
}

/** No step is given fewer crashes than this before it is declared poison. */
export const MIN_CRASH_LIMIT = 5;

/**
 * How many times a step may crash its worker — its attempt abandoned because the lease
 * expired (`LeaseExpired`: the process died, hung or lost the database) — before the step is
 * over: `max(maxAttempts, 5)`. Crashes are counted apart from failed attempts because most are
 * not the step's fault (a deploy, a neighbour's OOM, a lost node, a killed backend) and a step
 * must survive its worker dying under it even with `maxAttempts: 1` (at least once); five in
 * one step is already a strong signal, and a step whose author budgeted more retries gets as
 * many crashes. Every crash costs a worker, so the limit is what bounds a poison step.
 */
export function crashLimit(policy: ResolvedRetryPolicy): number {
  return Math.max(policy.maxAttempts, MIN_CRASH_LIMIT);
}

/**
 * Whether attempt row `a` counts toward its step's budget (maxAttempts, the crash limit) for run
 * row `r`: every attempt does, except those an operator's retry put behind the run (attempts of
 * `r.budget_step` numbered up to `r.budget_base`, core 0007). Attempt numbers keep growing across
 * a retry — attempts are history — so the budget is counted from that base.
 */
export function countsTowardBudget(a: string, r: string): RawBuilder<boolean> {
  const attempt = sql.ref(`${a}.attempt`);
  const step = sql.ref(`${a}.step_name`);
  return sql<boolean>`(${step} IS DISTINCT FROM ${sql.ref(`${r}.budget_step`)} OR ${attempt} > ${sql.ref(`${r}.budget_base`)})`;
}

/** First wait after an inconclusive lookup of an intent (`unknown`, a throwing reconcile). */
export const RECONCILE_FIRST_BACKOFF_MS = 5_000;
/** The longest wait between two lookups of one intent. */
export const RECONCILE_MAX_BACKOFF_MS = 600_000;

/**
 * How long an intent waits before the provider is asked about it again, after `lookups`
 * inconclusive lookups (1 after the first): 5 s, doubling, at most 10 minutes. Stored on the
 * intent (`reconcile_after`), so every worker's reconciler honours it.
 */
export function reconcileBackoffMs(lookups: number): number {
  return exponentialBackoffMs(lookups, { firstMs: RECONCILE_FIRST_BACKOFF_MS, maxMs: RECONCILE_MAX_BACKOFF_MS });
}
