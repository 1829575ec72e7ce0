import type { Kysely } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';
import { readPayloadLimits, type PayloadLimits } from './payload-limits.js';

/** How long a process uses the limits it read before reading them again: a change reaches every client and worker within this. */
export const LIMITS_CACHE_MS = 5_000;

/**
 * The database's payload limits as one process sees them: read at most every
 * {@link LIMITS_CACHE_MS}, concurrent callers sharing one read. When a re-read fails (the
 * database is unreachable) the last limits read are used; only a process that never read them
 * gets the error.
 */
export class PayloadLimitsCache {
  readonly #db: Kysely<LedgerflowDatabase>;
  readonly #ttlMs: number;
  #limits: PayloadLimits | undefined;
  #readAt = Number.NEGATIVE_INFINITY;
  #reading: Promise<PayloadLimits> | undefined;

  constructor(db: Kysely<LedgerflowDatabase>, ttlMs = LIMITS_CACHE_MS) {
    this.#db = db;
    this.#ttlMs = ttlMs;
  }

  /** The limits, from the cache when they were read less than the cache time ago. */
  current(): Promise<PayloadLimits> {
    if (this.#limits !== undefined && performance.now() - this.#readAt < this.#ttlMs) return Promise.resolve(this.#limits);
    this.#reading ??= readPayloadLimits(this.#db)
      .then(
        (limits) => {
          this.#limits = limits;
          this.#readAt = performance.now();
          return limits;
        },
        (error: unknown) => {
          if (this.#limits === undefined) throw error;
          return this.#limits;
        },
      )
      .finally(() => {
        this.#reading = undefined;
      });
    return this.#reading;
  }
}
