import { z } from 'zod';
import { ALWAYS_CHECKED, checkOptions, integer, rule } from './option-checks.js';

/**
 * Per-step retry policy. Delays are computed by the worker, but the time they are added to is
 * always the database clock (`now()`), never the worker's.
 *
 * @example
 * retry: { maxAttempts: 5, initialDelayMs: 200, maxDelayMs: 10_000, nonRetryable: [CardDeclined] }
 */
export interface RetryPolicy {
  /** Attempts in total, including the first. At least 1. */
  readonly maxAttempts?: number;
  /** Delay before the second attempt. */
  readonly initialDelayMs?: number;
  /** Upper bound for any single delay. */
  readonly maxDelayMs?: number;
  /** Growth per attempt: delay(n) = initialDelayMs * backoffFactor^(n-1), capped. */
  readonly backoffFactor?: number;
  /** Fraction of the delay that is randomised (0 = none, 1 = full jitter). */
  readonly jitter?: number;
  /** Errors of these classes fail the run at once, without another attempt. */
  readonly nonRetryable?: ReadonlyArray<abstract new (...args: never[]) => Error>;
}

export type ResolvedRetryPolicy = Required<RetryPolicy>;

export const DEFAULT_RETRY_POLICY: ResolvedRetryPolicy = {
  maxAttempts: 3,
  initialDelayMs: 1_000,
  maxDelayMs: 60_000,
  backoffFactor: 2,
  jitter: 0.2,
  nonRetryable: [],
};

/** What a {@link RetryPolicy} allows, its defaults filled in; `maxDelayMs` may be Infinity (no cap). */
const retryPolicySchema = z
  .object({
    maxAttempts: rule(integer().min(1), 'must be an integer >= 1'),
    initialDelayMs: rule(z.number().min(0), 'must be >= 0'),
    maxDelayMs: rule(z.number().or(z.literal(Infinity)), 'must be >= initialDelayMs'),
    backoffFactor: rule(z.number().min(1), 'must be >= 1'),
    jitter: rule(z.number().min(0).max(1), 'must be between 0 and 1'),
  })
  .superRefine(({ initialDelayMs: initial, maxDelayMs: max }, ctx) => {
    if (typeof initial !== 'number' || typeof max !== 'number' || max >= initial) return;
    ctx.addIssue({
      code: 'custom',
      path: ['maxDelayMs'],
      message: `must be >= initialDelayMs (got ${max} < ${initial})`,
    });
  }, ALWAYS_CHECKED);

/** Fills in defaults and rejects nonsense early, at declaration time. */
export function resolveRetryPolicy(where: string, policy: RetryPolicy | undefined): ResolvedRetryPolicy {
  const resolved: ResolvedRetryPolicy = { ...DEFAULT_RETRY_POLICY, ...stripUndefined(policy ?? {}) };
  checkOptions(
    retryPolicySchema,
    resolved,
    (problems) => new TypeError(`Invalid retry policy for ${where}: ${problems.join('; ')}.`),
  );
  return resolved;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
