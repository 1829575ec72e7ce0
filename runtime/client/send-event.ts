import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { AnyEvent } from '../../dsl/event.js';
import { ConflictError, DuplicateEventError, LedgerflowError, RunNotFoundError, ValidationError } from '../errors.js';
import type { PayloadLimitsCache } from '../limits/limits-cache.js';
import { payloadJson } from '../limits/payload-limits.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { RUNS_CHANNEL } from '../store/channels.js';
import { assertRunTransition } from '../store/state-machines.js';
import { inputHash } from '../store/input-hash.js';
import { lockEventKeyStatement } from '../store/event-key-lock.js';
import { describeIssues } from './validate-input.js';

export interface SendEventOptions {
  /**
   * Makes the send idempotent: sending the same event name with the same dedupe key again
   * stores nothing new and returns the first event (`created: false`). With another correlation
   * key or payload it throws `DuplicateEventError`.
   */
  readonly dedupeKey?: string;
}

export interface SentEvent {
  readonly eventId: string;
  /** `false` when the dedupe key named an event already stored. */
  readonly created: boolean;
  /** Waiting runs this send woke (0 when nobody waits yet: the event waits for them). */
  readonly woke: number;
}

/** What typed senders (generated `send<Event>` functions) need from a client. */
export interface EventSender {
  sendEvent<E extends AnyEvent>(
    event: E,
    key: string,
    payload: unknown,
    options?: SendEventOptions,
  ): Promise<SentEvent>;
}

/** The longest correlation key (and event dedupe key): what `waitFor`'s `match` may return, too. */
export const MAX_CORRELATION_KEY_LENGTH = 1_000;

/**
 * Validates an event's payload and key, then the payload's size against `limits` (read from the
 * database, cached); returns the payload as JSON text. Nothing is written, and the payload is not
 * sent, when this throws. `trx`: the caller's transaction, which reads the limits when they are not cached.
 */
export async function parseEvent(
  event: AnyEvent,
  key: string,
  payload: unknown,
  options: SendEventOptions,
  limits: PayloadLimitsCache,
  trx?: Kysely<LedgerflowDatabase>,
): Promise<string> {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_CORRELATION_KEY_LENGTH) {
    throw new ValidationError(
      `The correlation key of event "${event.name}" must be 1 to ${MAX_CORRELATION_KEY_LENGTH} characters long.`,
      [`key: ${JSON.stringify(key)}`],
    );
  }
  const { dedupeKey } = options;
  if (
    dedupeKey !== undefined &&
    (typeof dedupeKey !== 'string' || dedupeKey.length === 0 || dedupeKey.length > MAX_CORRELATION_KEY_LENGTH)
  ) {
    throw new ValidationError(
      `The dedupe key of event "${event.name}" must be 1 to ${MAX_CORRELATION_KEY_LENGTH} characters long.`,
      [`dedupeKey: ${JSON.stringify(dedupeKey)}`],
    );
  }
  const parsed = event.payload.safeParse(payload);
  if (!parsed.success) {
    const issues = describeIssues(parsed.error.issues);
    throw new ValidationError(
      `Invalid payload for event "${event.name}":\n${issues.map((i) => `  - ${i}`).join('\n')}\nNothing was written.`,
      issues,
    );
  }
  let json: string | undefined;
  try {
    json = payloadJson('event payload', `event "${event.name}"`, parsed.data, await limits.current(trx));
  } catch (error) {
    if (error instanceof LedgerflowError) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new ValidationError(`The payload of event "${event.name}" cannot be stored as JSON: ${reason}.`, [
      `(payload): ${reason}`,
    ]);
  }
  if (json === undefined)
    throw new ValidationError(`The payload of event "${event.name}" has no JSON form.`, ['(payload)']);
  return json;
}

/**
 * Stores an event and wakes the runs parked waiting for it, on `db` — which must be a
 * transaction (ours or the caller's): the advisory lock taken first serializes this with every
 * step that looks for events of this name and key (`executeWaitFor`), so a step that is about to
 * park sees this event, or this send sees the parked step. Workers are notified at commit.
 */
export async function sendEventIn(
  trx: Kysely<LedgerflowDatabase>,
  event: AnyEvent,
  key: string,
  payloadJson: string,
  options: SendEventOptions,
): Promise<SentEvent> {
  await lockEventKeyStatement(event.name, key).execute(trx);
  const { rows } = await sendEventStatement(randomUUID(), event.name, key, payloadJson, options.dedupeKey).execute(trx);
  const row = rows[0];
  if (row === undefined) {
    // The conflicting event was deleted between the insert and the read: nothing was stored.
    throw new Error(
      `Event "${event.name}" with dedupe key "${options.dedupeKey}" conflicted with an event that then disappeared; send it again.`,
    );
  }
  if (!row.same) {
    throw new DuplicateEventError(
      `Dedupe key "${options.dedupeKey}" of event "${event.name}" already names event ${row.id} with another correlation key or payload. ` +
        'A dedupe key names one event: use a new one for another event.',
    );
  }
  return { eventId: row.id, created: row.created, woke: Number(row.woke) };
}

/**
 * The statement of {@link sendEventIn} after its lock: the insert, the wake-up, or the event the
 * dedupe key already names — live, or pruned and kept as a tombstone (core 0016: read through
 * `ledgerflow.pruned_event`, which waits for a prune holding the live event and then reads the
 * archive afresh, so the event is found in one place or the other).
 */
export function sendEventStatement(
  id: string,
  event: string,
  key: string,
  payloadJson: string,
  dedupeKey: string | undefined,
): RawBuilder<{ id: string; created: boolean; same: boolean; woke: number | string }> {
  assertRunTransition('waiting', 'waiting');
  if (dedupeKey === undefined) {
    return sql<{ id: string; created: boolean; same: boolean; woke: number | string }>`
      WITH inserted AS (
        INSERT INTO ledgerflow.event (id, name, correlation_key, payload, dedupe_key, created_at)
        VALUES (${id}, ${event}, ${key}, ${payloadJson}::jsonb, NULL, statement_timestamp())
        RETURNING id
      ),
      ${wakeWaiters(event, key)}
      SELECT i.id, true AS created, true AS same, (SELECT count(*) FROM woken) AS woke FROM inserted i`;
  }
  return sql<{ id: string; created: boolean; same: boolean; woke: number | string }>`
    WITH pruned AS (
      SELECT p.id, p.correlation_key, p.payload_hash FROM ledgerflow.pruned_event(${event}, ${dedupeKey}::text) p
    ),
    inserted AS (
      INSERT INTO ledgerflow.event (id, name, correlation_key, payload, dedupe_key, created_at)
      SELECT ${id}, ${event}, ${key}, ${payloadJson}::jsonb, ${dedupeKey}::text, statement_timestamp()
       WHERE NOT EXISTS (SELECT 1 FROM pruned)
      ON CONFLICT (name, dedupe_key) DO NOTHING
      RETURNING id
    ),
    ${wakeWaiters(event, key)}
    SELECT i.id, true AS created, true AS same, (SELECT count(*) FROM woken) AS woke FROM inserted i
    UNION ALL
    SELECT e.id, false, e.correlation_key = ${key} AND e.payload = ${payloadJson}::jsonb, 0
      FROM ledgerflow.event e
     WHERE NOT EXISTS (SELECT 1 FROM inserted) AND NOT EXISTS (SELECT 1 FROM pruned) AND e.name = ${event} AND e.dedupe_key = ${dedupeKey}::text
    UNION ALL
    SELECT p.id, false, p.correlation_key = ${key} AND p.payload_hash = ${inputHash(sql`${payloadJson}::jsonb`)}, 0
      FROM pruned p`;
}

/** The `woken` CTE of a send: the runs parked waiting for this event's name and key, if one was inserted. */
function wakeWaiters(event: string, key: string): RawBuilder<unknown> {
  return sql`
woken AS (
      UPDATE ledgerflow.workflow_run r
         SET run_after = statement_timestamp(), updated_at = statement_timestamp()
        FROM ledgerflow.step_wait w
       WHERE EXISTS (SELECT 1 FROM inserted)
         AND w.kind = 'event' AND w.event_name = ${event} AND w.correlation_key = ${key} AND w.resolved_at IS NULL
         AND r.id = w.run_id AND r.status = 'waiting'
      RETURNING r.id, pg_notify(${RUNS_CHANNEL}, r.id::text)
    )`;
}

/**
 * `client.signal`: refused for a run that does not exist or that ended (no step of it will take
 * the signal), then sent in the same transaction as any event ({@link sendEventIn}) under the
 * run's {@link signalKey}.
 */
export async function sendSignal(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  event: AnyEvent,
  payloadJson: string,
  options: SendEventOptions,
): Promise<SentEvent> {
  return db.transaction().execute(async (trx) => {
    // Not locked: a row lock here would deadlock with a waiting step's commit (it holds the
    // event lock and updates the run). A run that settles right after this check leaves the
    // signal stored and untaken, which is harmless.
    const run = await trx
      .selectFrom('ledgerflow.workflow_run')
      .select('status')
      .where('id', '=', runId)
      .executeTakeFirst();
    if (run === undefined) throw new RunNotFoundError(`No run with id ${runId} in this database; nothing was sent.`);
    if (run.status === 'completed' || run.status === 'failed' || run.status === 'cancelled') {
      throw new ConflictError(`Run ${runId} is ${run.status}: no step of it will take a signal. Nothing was sent.`);
    }
    return sendEventIn(trx, event, signalKey(runId), payloadJson, options);
  });
}

/** A run's signal: an event whose correlation key is the run id (`waitFor` without `match`). */
export function signalKey(runId: string): string {
  return runId.toLowerCase();
}
