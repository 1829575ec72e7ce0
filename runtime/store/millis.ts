import { sql, type RawBuilder } from 'kysely';

/*
 * The one way a statement turns a duration into an interval. Here, below everything that writes a
 * time — the worker's commits and leases, the reconciler's, a start's deadline and debounce
 * window, a prune's cut-off — because each of them adds durations to database time.
 */

/**
 * `ms` as an SQL interval; durations come from the worker, instants always from the database.
 * Every instant the runtime writes is `statement_timestamp()`, never `now()`: inside a
 * transaction `now()` is when the transaction began — for a transactional step, before its
 * handler ran — so a lease or due time computed from it could already be in the past.
 */
export function millis(ms: number): RawBuilder<unknown> {
  return sql`(${ms}::double precision * interval '1 millisecond')`;
}
