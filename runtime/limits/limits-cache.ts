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

  /**
   * The limits, from the cache when they were read less than the cache time ago. `via`: the
   * executor to read them with when they are not — a caller's transaction, which must not wait
   * for another connection (PGlite has one: a read on the store's own `db` would wait for the
   * transaction to end, and the transaction for the read).
   */
  current(via: Kysely<LedgerflowDatabase> = this.#db): Promise<PayloadLimits> {
    if (this.#limits !== undefined && performance.now() - this.#readAt < this.#ttlMs)
      return Promise.resolve(this.#limits);
    if (via !== this.#db) return this.#read(via);
    this.#reading ??= this.#read(via).finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }

  async #read(via: Kysely<LedgerflowDatabase>): Promise<PayloadLimits> {
    try {
      const limits = await readPayloadLimits(via);
      this.#limits = limits;
      this.#readAt = performance.now();
      return limits;
    } catch (error) {
      if (this.#limits === undefined) throw error;
      return this.#limits;
    }
  }
}
