import { sql, type RawBuilder } from 'kysely';

/*
 * The lock an event's waiter and its sender share. Here, below the worker and the client, because
 * the worker's `waitFor` takes it before it looks for an event and parks the run
 * (worker/executors/wait-for-executor.ts), and the client's send takes it before it stores the
 * event and wakes the parked runs (client/send-event.ts): the same key, or they could miss each other.
 */

/**
 * Serializes everything that looks for or delivers events of one name and correlation key, for
 * the rest of the transaction: the step that parks the run (having found no event) and the
 * sender that stores one (and wakes whoever is parked) cannot miss each other — each sees the
 * other's commit, whichever comes first.
 */
export function lockEventKeyStatement(event: string, key: string): RawBuilder<unknown> {
  return sql`SELECT pg_advisory_xact_lock(hashtextextended(${`ledgerflow.event:${event}`} || ':' || ${key}, 0))`;
}
