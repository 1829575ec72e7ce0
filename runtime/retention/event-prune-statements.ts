import { sql, type RawBuilder } from 'kysely';
import { inputHash } from '../store/input-hash.js';
import { millis } from '../store/millis.js';
import type { PruneSelection } from './prune-options.js';

/*
 * The statements of event retention (core 0016; prune.ts runs them): a batch that deletes
 * consumed or unconsumed events past their cut-off, archiving those with a dedupe key as
 * tombstones (event_archive), a batch of event-tombstone retention, and a dry run's counts.
 * Each batch is one statement, SKIP LOCKED.
 */

/** Which events a pass prunes: consumed ones before one cut-off, unconsumed ones before another. */
export interface EventSelection {
  readonly consumed: boolean;
  readonly olderThanMs: number;
}

/** The event selections `selection` asks for: consumed events, unconsumed ones, both or none. */
export function eventSelections(selection: PruneSelection): EventSelection[] {
  return [
    ...(selection.eventsOlderThanMs !== undefined
      ? [{ consumed: true, olderThanMs: selection.eventsOlderThanMs }]
      : []),
    ...(selection.unconsumedEventsOlderThanMs !== undefined
      ? [{ consumed: false, olderThanMs: selection.unconsumedEventsOlderThanMs }]
      : []),
  ];
}

/**
 * What makes event `e` prunable: consumed before the cut-off (index event_consumed_idx), or
 * unconsumed and sent before it. A batch skips an event a step is taking (SKIP LOCKED); a step
 * that meets one a batch holds waits for it and, finding it deleted, goes on to the next (its
 * `LIMIT 1 FOR UPDATE` counts only rows it locked).
 */
function prunableEvent(which: EventSelection): RawBuilder<unknown> {
  const cutOff = sql`statement_timestamp() - ${millis(which.olderThanMs)}`;
  return which.consumed ? sql`e.consumed_at < ${cutOff}` : sql`e.consumed_at IS NULL AND e.created_at < ${cutOff}`;
}

/**
 * One batch of event retention: at most `batchSize` prunable events, oldest first, locked with
 * SKIP LOCKED; those with a dedupe key archived as tombstones (a tombstone already there for the
 * key is kept); the events deleted.
 */
export function pruneEventsBatchStatement(
  which: EventSelection,
  batchSize: number,
): RawBuilder<{ events: number; archived: number }> {
  return sql<{ events: number; archived: number }>`
    WITH victims AS (
      SELECT e.id FROM ledgerflow.event e
       WHERE ${prunableEvent(which)}
       ORDER BY ${which.consumed ? sql`e.consumed_at` : sql`e.created_at`}, e.id
       LIMIT ${batchSize}
         FOR UPDATE OF e SKIP LOCKED
    ),
    archived AS (
      INSERT INTO ledgerflow.event_archive
             (name, dedupe_key, id, correlation_key, payload_hash, created_at, consumed_by_run, consumed_by_step, consumed_at)
      SELECT e.name, e.dedupe_key, e.id, e.correlation_key, ${inputHash(sql`e.payload`)}, e.created_at,
             e.consumed_by_run, e.consumed_by_step, e.consumed_at
        FROM ledgerflow.event e JOIN victims v ON v.id = e.id
       WHERE e.dedupe_key IS NOT NULL
      ON CONFLICT DO NOTHING
      RETURNING 1
    ),
    deleted AS (
      DELETE FROM ledgerflow.event e USING victims v WHERE e.id = v.id
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM deleted)::int AS events, (SELECT count(*) FROM archived)::int AS archived`;
}

/** One batch of event-archive retention: tombstones of events sent before the cut-off, oldest first. */
export function pruneEventArchiveBatchStatement(
  olderThanMs: number,
  batchSize: number,
): RawBuilder<{ events: number }> {
  return sql<{ events: number }>`
    WITH expired AS (
      SELECT a.name, a.dedupe_key FROM ledgerflow.event_archive a
       WHERE a.created_at < statement_timestamp() - ${millis(olderThanMs)}
       ORDER BY a.created_at, a.name, a.dedupe_key
       LIMIT ${batchSize}
         FOR UPDATE OF a SKIP LOCKED
    ),
    deleted AS (
      DELETE FROM ledgerflow.event_archive a USING expired x WHERE a.name = x.name AND a.dedupe_key = x.dedupe_key
      RETURNING 1
    )
    SELECT count(*)::int AS events FROM deleted`;
}

/** A dry run of event retention: how many events a pass would delete now, and how many of them it would archive. */
export function countEventsStatement(which: EventSelection): RawBuilder<{ events: number; archived: number }> {
  return sql<{ events: number; archived: number }>`
    SELECT count(*)::int AS events, count(e.dedupe_key)::int AS archived FROM ledgerflow.event e WHERE ${prunableEvent(which)}`;
}

/** A dry run of event-archive retention: how many tombstones are past the cut-off. */
export function countEventArchiveStatement(olderThanMs: number): RawBuilder<{ events: number }> {
  return sql<{ events: number }>`
    SELECT count(*)::int AS events FROM ledgerflow.event_archive a WHERE a.created_at < statement_timestamp() - ${millis(olderThanMs)}`;
}
