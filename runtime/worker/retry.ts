import type { ResolvedRetryPolicy } from '../../dsl/retry-policy.js';
import { ConflictError, NonRetryableError } from '../errors.js';

/**
 * Retry decisions. The delay is a duration; the worker adds it to the database clock
 * (`now() + delay`), so a skewed worker clock cannot make a run eligible early or late.
 */
export function isNonRetryable(error: unknown, policy: ResolvedRetryPolicy): boolean {
  if (error instanceof NonRetryableError || error instanceof ConflictError) return true;
  return policy.nonRetryable.some((errorClass) => error instanceof errorClass);
}

/**
 * Delay before the next attempt after `failures` failed attempts (1 after the first failure):
 * `initialDelayMs * backoffFactor^(failures-1)`, capped at `maxDelayMs`, of which the fraction
 * `jitter` is randomised downwards so that runs failing together do not retry together.
 */
export function backoffDelayMs(policy: ResolvedRetryPolicy, failures: number, random: () => number = Math.random): number {
  const exponential = policy.initialDelayMs * policy.backoffFactor ** Math.max(0, failures - 1);
  const capped = Math.min(policy.maxDelayMs, exponential);
  return Math.round(capped * (1 - policy.jitter * random()));
}
