// Exponential backoff for in-process retries: the worker's claim loop after a failed claim, its
// start while the database ends sessions, the runs subscription and the client's settled-run
// subscription after a lost or refused LISTEN, and a step's re-read while the database is
// unreachable (`untilReachable`). Each caller keeps its own attempt counter; this module only
// turns it into a delay. It also spaces an intent's lookups (`reconcileBackoffMs` in
// `worker/retry.ts`, stored in the database); a run's retry backoff has its own policy
// (`backoffDelayMs`). In runtime/ itself, beside errors.ts, because the worker and the client
// both back off and there is one backoff.

export interface BackoffOptions {
  /** The delay of the first attempt. */
  readonly firstMs: number;
  /** No delay is longer than this. */
  readonly maxMs: number;
}

/**
 * The delay before attempt `attempt` (1 = the first retry): `firstMs`, doubling with each
 * attempt, never more than `maxMs`. Attempts below 1 count as the first.
 *
 * @example
 * exponentialBackoffMs(1, { firstMs: 100, maxMs: 5_000 }); // 100
 * exponentialBackoffMs(4, { firstMs: 100, maxMs: 5_000 }); // 800
 * exponentialBackoffMs(9, { firstMs: 100, maxMs: 5_000 }); // 5000
 */
export function exponentialBackoffMs(attempt: number, { firstMs, maxMs }: BackoffOptions): number {
  // 2 ** 1024 is Infinity, which min() turns into maxMs: no overflow to guard against.
  return Math.min(maxMs, firstMs * 2 ** Math.max(0, attempt - 1));
}

/** Resolves after `ms` (an uninterruptible wait; the claim loop has its own, wakeable one). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
