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

/** Fills in defaults and rejects nonsense early, at declaration time. */
export function resolveRetryPolicy(where: string, policy: RetryPolicy | undefined): ResolvedRetryPolicy {
  const resolved: ResolvedRetryPolicy = { ...DEFAULT_RETRY_POLICY, ...stripUndefined(policy ?? {}) };
  const problems: string[] = [];
  if (!Number.isInteger(resolved.maxAttempts) || resolved.maxAttempts < 1) {
    problems.push(`maxAttempts must be an integer >= 1 (got ${resolved.maxAttempts})`);
  }
  if (!(resolved.initialDelayMs >= 0)) problems.push(`initialDelayMs must be >= 0 (got ${resolved.initialDelayMs})`);
  if (!(resolved.maxDelayMs >= resolved.initialDelayMs)) {
    problems.push(`maxDelayMs must be >= initialDelayMs (got ${resolved.maxDelayMs} < ${resolved.initialDelayMs})`);
  }
  if (!(resolved.backoffFactor >= 1)) problems.push(`backoffFactor must be >= 1 (got ${resolved.backoffFactor})`);
  if (!(resolved.jitter >= 0 && resolved.jitter <= 1)) problems.push(`jitter must be between 0 and 1 (got ${resolved.jitter})`);
  if (problems.length > 0) {
    throw new TypeError(`Invalid retry policy for ${where}: ${problems.join('; ')}.`);
  }
  return resolved;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
