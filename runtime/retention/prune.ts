import { sql, type Kysely, type RawBuilder } from 'kysely';
import { z } from 'zod';
import { ALWAYS_CHECKED, checkOptions, integer, rule } from '../../dsl/option-checks.js';
import { ValidationError } from '../errors.js';
import { FINAL_RUN_STATUSES, type FinalRunStatus, type LedgerflowDatabase } from '../store/tables.js';
import { inputHash } from '../store/input-hash.js';
import { millis } from '../store/millis.js';
import { sqlStatusList } from '../store/state-machines.js';

/*
 * Retention: finished runs are deleted in bounded batches; their identity is kept (core 0008).
 *
 * A pass deletes, batch after batch, the oldest finished runs that may go, each batch ONE
 * statement (its own short transaction):
 *   1. take at most `batchSize` runs by the finished-runs index, oldest first, `FOR UPDATE SKIP
 *      LOCKED` — concurrent passes take disjoint runs and never wait for each other or for a
 *      start that holds a run (ledgerflow.pruned_run locks it FOR KEY SHARE);
 *   2. write each run's tombstone into run_archive and its recorded ledger rows into
 *      effect_archive;
 *   3. delete the runs: attempts, results, waits and ledger rows go with them (ON DELETE CASCADE).
 * A run may go when it is final — completed, failed, cancelled, compensated or compensation_failed
 * (those of `statuses`) — finished before
 * the cut-off (database time), has no open intent, has no child left (children go first: a parent
 * whose children are pruned in one batch goes in a later one) and is not the child of an
 * unfinished run. Nor is it the child of a `failed` or `cancelled` run that must stay: a retry
 * resumes such a run at its step, which reads its children again, so they go only when their
 * parent may go in the same pass (checked up to {@link RETRY_READ_DEPTH} such parents up; a
 * deeper chain stays). Nothing else is ever deleted: an unfinished run never matches.
 *
 * The pass stops when a batch deletes nothing (what remains is not prunable, or another pass holds
 * it), or when `signal` aborts — between batches, never inside one. With `archiveOlderThanMs` it
 * then deletes tombstones of runs finished longer ago than that, in batches the same way.
 *
 * Events (core 0016), when asked: `eventsOlderThanMs` deletes events consumed longer ago than that
 * (the step that took one keeps its payload in its result), `unconsumedEventsOlderThanMs` events no
 * step took in that long — each batch one statement, oldest first, SKIP LOCKED (a step taking an
 * event that a batch holds takes the next one). An event with a dedupe key leaves a tombstone in event_archive, so a
 * send with that key stores nothing (ledgerflow.pruned_event). `archiveOlderThanMs` also deletes
 * event tombstones of events sent longer ago than that.
 *
 * A dry run deletes nothing: it reads the runs a pass would prune, page by page (keyset on the
 * same index), counting a parent when none of its children must stay (one level of children), and
 * counts the events and tombstones that would go.
 */

/** {@link FINAL_RUN_STATUSES} as a literal SQL list: the planner matches it to the partial index workflow_run_finished_idx. */
const FINAL_SQL = sqlStatusList(FINAL_RUN_STATUSES);
/**
 * The final statuses a retry takes a run from back to the step it stopped at, where a `child` or
 * `forEach` step reads its children again (client/operator/retry.ts; a `compensation_failed` run
 * resumes its compensations, which read no children). Children of such a run stay while it does.
 */
export const CHILDREN_READ_ON_RETRY: readonly FinalRunStatus[] = ['failed', 'cancelled'];
const CHILDREN_READ_ON_RETRY_SQL = sqlStatusList(CHILDREN_READ_ON_RETRY);
/**
 * How many `failed`/`cancelled` ancestors up a child's prune looks to see whether they all go in
 * the pass too; a child with more of them in a row stays (a bound on the statement, not a rule
 * anyone relies on: such chains are kept, never pruned wrongly).
 */
export const RETRY_READ_DEPTH = 3;

export interface PruneOptions {
  /** Prune runs that finished at least this long ago (database time). */
  readonly olderThanMs: number;
  /** Runs deleted per batch, each batch one short transaction. Default 1 000, at most 10 000. */
  readonly batchSize?: number;
  /** Which finished runs to prune. Default every final status ({@link FINAL_RUN_STATUSES}). */
  readonly statuses?: readonly FinalRunStatus[];
  /** Count what a pass would prune; delete nothing. */
  readonly dryRun?: boolean;
  /**
   * Also delete the archived identities (run_archive, effect_archive) of runs that finished longer
   * ago than this — after which a start with such a run's id or dedupe key creates a new run. At
   * least `olderThanMs`. Default: the archive is kept forever.
   */
  readonly archiveOlderThanMs?: number;
  /**
   * Also delete events consumed at least this long ago (database time); one with a dedupe key
   * leaves a tombstone (event_archive), so sending it again stores nothing. Default: events stay.
   */
  readonly eventsOlderThanMs?: number;
  /**
   * Also delete events that no step has taken and that were sent at least this long ago: a run
   * that waits for one later will not find it. Default: unconsumed events stay.
   */
  readonly unconsumedEventsOlderThanMs?: number;
  /** Stops the pass between batches (the report says `stopped`). */
  readonly signal?: AbortSignal;
  /** Called after each batch. */
  readonly onBatch?: (batch: PruneBatch) => void;
}

export interface PruneBatch {
  /**
   * `runs`: finished runs pruned (or counted, in a dry run); `archive`: run tombstones deleted;
   * `events`: events pruned; `event-archive`: event tombstones deleted.
   */
  readonly table: 'runs' | 'archive' | 'events' | 'event-archive';
  /** 1-based, per table. */
  readonly index: number;
  /** Rows of `table` this batch deleted (or counted). */
  readonly runs: number;
  /** Recorded ledger rows archived with the runs (`runs` batches). */
  readonly effects: number;
  readonly ms: number;
}

export interface PruneReport {
  readonly dryRun: boolean;
  /** Runs deleted (dry run: that a pass would delete now). */
  readonly runsPruned: number;
  /** Their recorded ledger rows, kept in effect_archive. */
  readonly effectsArchived: number;
  /** Tombstones deleted by `archiveOlderThanMs` (dry run: that would be). */
  readonly archiveDeleted: number;
  /** Events deleted by `eventsOlderThanMs` and `unconsumedEventsOlderThanMs` (dry run: that would be). */
  readonly eventsPruned: number;
  /** Of those, the ones with a dedupe key, kept as tombstones in event_archive. */
  readonly eventsArchived: number;
  /** Event tombstones deleted by `archiveOlderThanMs` (dry run: that would be). */
  readonly eventArchiveDeleted: number;
  readonly batches: number;
  readonly ms: number;
  /** The signal stopped the pass before it was done. */
  readonly stopped: boolean;
}

export const DEFAULT_PRUNE_BATCH_SIZE = 1_000;
const MAX_PRUNE_BATCH_SIZE = 10_000;

/** What a batch statement needs, validated. */
export interface PruneSelection {
  readonly olderThanMs: number;
  readonly batchSize: number;
  readonly statuses: readonly FinalRunStatus[];
  readonly eventsOlderThanMs?: number | undefined;
  readonly unconsumedEventsOlderThanMs?: number | undefined;
}

/**
 * Prunes finished runs in bounded batches, keeping their identity and recorded effects in the
 * archive (see the header of this file, and docs/operations/retention.md).
 *
 * @example
 * const report = await pruneRuns(store.db, { olderThanMs: 30 * 86_400_000, batchSize: 1_000 });
 * console.log(`${report.runsPruned} runs pruned in ${report.batches} batches, ${report.ms} ms`);
 */
export async function pruneRuns(db: Kysely<LedgerflowDatabase>, options: PruneOptions): Promise<PruneReport> {
  const selection = parsePruneOptions(options);
  const started = performance.now();
  const { signal, onBatch } = options;
  let runsPruned = 0;
  let effectsArchived = 0;
  let archiveDeleted = 0;
  let eventsPruned = 0;
  let eventsArchived = 0;
  let eventArchiveDeleted = 0;
  let batches = 0;
  const stopped = () => signal?.aborted === true;
  const report = (): PruneReport => ({
    dryRun: options.dryRun === true,
    runsPruned,
    effectsArchived,
    archiveDeleted,
    eventsPruned,
    eventsArchived,
    eventArchiveDeleted,
    batches,
    ms: Math.round(performance.now() - started),
    stopped: stopped(),
  });
  const batch = (table: PruneBatch['table'], index: number, runs: number, effects: number, at: number): void => {
    batches += 1;
    onBatch?.({ table, index, runs, effects, ms: Math.round(performance.now() - at) });
  };

  if (options.dryRun === true) {
    let after: { finishedAt: string; id: string } | undefined;
    for (let index = 1; !stopped(); index++) {
      const at = performance.now();
      const page = await prunableRunsStatement(selection, after).execute(db);
      const last = page.rows.at(-1);
      if (last === undefined) break;
      const effects = page.rows.reduce((sum, r) => sum + r.effects, 0);
      runsPruned += page.rows.length;
      effectsArchived += effects;
      batch('runs', index, page.rows.length, effects, at);
      after = { finishedAt: last.finished_at, id: last.id };
    }
    if (options.archiveOlderThanMs !== undefined && !stopped()) {
      const at = performance.now();
      const row = await countArchiveStatement(db, options.archiveOlderThanMs).executeTakeFirstOrThrow();
      archiveDeleted = row.runs;
      batch('archive', 1, row.runs, 0, at);
    }
    for (const which of eventSelections(selection)) {
      if (stopped()) break;
      const at = performance.now();
      const row = (await countEventsStatement(which).execute(db)).rows[0]!;
      eventsPruned += row.events;
      eventsArchived += row.archived;
      batch('events', 1, row.events, 0, at);
    }
    if (options.archiveOlderThanMs !== undefined && !stopped()) {
      const at = performance.now();
      const row = (await countEventArchiveStatement(options.archiveOlderThanMs).execute(db)).rows[0]!;
      eventArchiveDeleted = row.events;
      batch('event-archive', 1, row.events, 0, at);
    }
    return report();
  }

  for (let index = 1; !stopped(); index++) {
    const at = performance.now();
    const row = (await pruneBatchStatement(selection).execute(db)).rows[0]!;
    if (row.runs === 0) break;
    runsPruned += row.runs;
    effectsArchived += row.effects;
    batch('runs', index, row.runs, row.effects, at);
  }
  if (options.archiveOlderThanMs !== undefined) {
    for (let index = 1; !stopped(); index++) {
      const at = performance.now();
      const row = (await pruneArchiveBatchStatement(options.archiveOlderThanMs, selection.batchSize).execute(db)).rows[0]!;
      if (row.runs === 0) break;
      archiveDeleted += row.runs;
      batch('archive', index, row.runs, 0, at);
    }
  }
  let eventBatch = 0;
  for (const which of eventSelections(selection)) {
    while (!stopped()) {
      const at = performance.now();
      const row = (await pruneEventsBatchStatement(which, selection.batchSize).execute(db)).rows[0]!;
      if (row.events === 0) break;
      eventsPruned += row.events;
      eventsArchived += row.archived;
      batch('events', ++eventBatch, row.events, 0, at);
    }
  }
  if (options.archiveOlderThanMs !== undefined) {
    for (let index = 1; !stopped(); index++) {
      const at = performance.now();
      const row = (await pruneEventArchiveBatchStatement(options.archiveOlderThanMs, selection.batchSize).execute(db)).rows[0]!;
      if (row.events === 0) break;
      eventArchiveDeleted += row.events;
      batch('event-archive', index, row.events, 0, at);
    }
  }
  return report();
}

/** A retention option's age: finite and >= 0 (the worker's `retention` takes the same). */
export const retentionMilliseconds = rule(z.number().min(0), 'must be a number of milliseconds >= 0');

/** What {@link PruneOptions} allow; the archive must outlive what it protects the keys of. */
const pruneOptionsSchema = z
  .object({
    olderThanMs: retentionMilliseconds,
    batchSize: rule(integer().min(1).max(MAX_PRUNE_BATCH_SIZE), `must be an integer from 1 to ${MAX_PRUNE_BATCH_SIZE}`).optional(),
    statuses: rule(z.array(z.unknown()), `must list at least one of ${FINAL_RUN_STATUSES.join(', ')}`)
      .refine((statuses) => statuses.length > 0, `must list at least one of ${FINAL_RUN_STATUSES.join(', ')}`)
      .superRefine((statuses, ctx) => {
        for (const status of statuses) {
          if (FINAL_RUN_STATUSES.includes(status as FinalRunStatus)) continue;
          ctx.addIssue({
            code: 'custom',
            message: `"${String(status)}" is not a final status; only ${FINAL_RUN_STATUSES.join(', ')} runs are ever pruned`,
          });
        }
      })
      .optional(),
    eventsOlderThanMs: retentionMilliseconds.optional(),
    unconsumedEventsOlderThanMs: retentionMilliseconds.optional(),
    archiveOlderThanMs: retentionMilliseconds.optional(),
  })
  .superRefine((options, ctx) => {
    const { archiveOlderThanMs: archive } = options;
    if (!isDuration(archive)) return;
    const outlive = (name: string, ms: unknown, what: string): void => {
      if (!isDuration(ms) || archive >= ms) return;
      ctx.addIssue({
        code: 'custom',
        path: ['archiveOlderThanMs'],
        message: `must be at least ${name} (${ms}); got ${archive}. The archive is what protects the ${what}: it must outlive them`,
      });
    };
    outlive('eventsOlderThanMs', options.eventsOlderThanMs, 'dedupe keys of pruned events');
    outlive('unconsumedEventsOlderThanMs', options.unconsumedEventsOlderThanMs, 'dedupe keys of pruned events');
    outlive('olderThanMs', options.olderThanMs, 'keys of pruned runs');
  }, ALWAYS_CHECKED);

/** Checks the options before anything is read or deleted. */
export function parsePruneOptions(options: PruneOptions): PruneSelection {
  checkOptions(
    pruneOptionsSchema,
    options,
    (problems) => new ValidationError(`Invalid prune options:\n${problems.map((p) => `  - ${p}`).join('\n')}\nNothing was pruned.`, problems),
    { separator: ': ' },
  );
  const { olderThanMs, eventsOlderThanMs, unconsumedEventsOlderThanMs } = options;
  const statuses = options.statuses ?? FINAL_RUN_STATUSES;
  return { olderThanMs, batchSize: options.batchSize ?? DEFAULT_PRUNE_BATCH_SIZE, statuses: [...new Set(statuses)], eventsOlderThanMs, unconsumedEventsOlderThanMs };
}

/** A number of milliseconds a retention option may hold: finite and >= 0. */
function isDuration(ms: unknown): ms is number {
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0;
}

/**
 * What makes run `r` prunable by itself: finished (one of `statuses`) before the cut-off, no open
 * intent, and its parent lets it go ({@link parentLetsGo}). The literal status list lets the
 * planner use the partial index workflow_run_finished_idx.
 */
function prunableByItself(r: RawBuilder<unknown>, selection: PruneSelection): RawBuilder<unknown> {
  return sql`${finishedBeforeCutOff(r, selection)}
         AND ${parentLetsGo(r, selection, RETRY_READ_DEPTH)}`;
}

/** Run `r` is final (one of `statuses`), finished before the cut-off, and has no open intent. */
function finishedBeforeCutOff(r: RawBuilder<unknown>, selection: PruneSelection): RawBuilder<unknown> {
  return sql`${r}.status IN (${FINAL_SQL}) AND ${r}.status = ANY(${[...selection.statuses]}::text[])
         AND ${r}.finished_at < statement_timestamp() - ${millis(selection.olderThanMs)}
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = ${r}.id AND e.status = 'intent')`;
}

/**
 * Run `r`'s parent, if any, no longer reads it: the parent is final, and — when a retry would
 * resume it at a step that reads its children again ({@link CHILDREN_READ_ON_RETRY}) — is itself
 * prunable in this pass (so the child goes first, then the parent, and a retry in between is
 * refused: client/operator/retry.ts). `levels` bounds how many such parents up this looks.
 */
function parentLetsGo(r: RawBuilder<unknown>, selection: PruneSelection, levels: number): RawBuilder<unknown> {
  const p = sql.raw(`p${levels}`);
  const parentGoesToo =
    levels === 0 ? sql`false` : sql`${finishedBeforeCutOff(p, selection)}
         AND ${parentLetsGo(p, selection, levels - 1)}`;
  return sql`NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run ${p}
          WHERE ${p}.id = ${r}.parent_run_id
            AND (${p}.status NOT IN (${FINAL_SQL})
                 OR (${p}.status IN (${CHILDREN_READ_ON_RETRY_SQL}) AND (${parentGoesToo}) IS NOT TRUE)))`;
}

/**
 * One prune batch: at most `batchSize` prunable runs (no child left), oldest first, locked with
 * SKIP LOCKED; their tombstones and recorded ledger rows archived; the runs deleted (cascading to
 * attempts, results, waits and ledger rows). A tombstone that already exists for the run's id or
 * key is kept as it is (ON CONFLICT DO NOTHING): the older identity goes on protecting the key.
 */
export function pruneBatchStatement(selection: PruneSelection): RawBuilder<{ runs: number; archived: number; effects: number }> {
  return sql<{ runs: number; archived: number; effects: number }>`
    WITH victims AS (
      SELECT r.id FROM ledgerflow.workflow_run r
       WHERE ${prunableByItself(sql`r`, selection)}
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run c WHERE c.parent_run_id = r.id)
       ORDER BY r.finished_at, r.id
       LIMIT ${selection.batchSize}
         FOR UPDATE OF r SKIP LOCKED
    ),
    archived AS (
      INSERT INTO ledgerflow.run_archive
             (id, workflow_name, workflow_version, dedupe_key, input_hash, status, parent_run_id, created_at, finished_at)
      SELECT r.id, r.workflow_name, r.workflow_version, r.dedupe_key, ${inputHash(sql`r.input`)}, r.status, r.parent_run_id,
             r.created_at, r.finished_at
        FROM ledgerflow.workflow_run r JOIN victims v ON v.id = r.id
      ON CONFLICT DO NOTHING
      RETURNING id
    ),
    effects AS (
      INSERT INTO ledgerflow.effect_archive
             (run_id, step_name, idempotency_key, kind, effect, request_hash, resolution, recorded_at)
      SELECT e.workflow_id, e.step_name, e.idempotency_key, e.kind, e.effect, e.request_hash, e.resolution, e.recorded_at
        FROM ledgerflow.step_effect e JOIN archived a ON a.id = e.workflow_id
       WHERE e.status = 'recorded'
      RETURNING 1
    ),
    deleted AS (
      DELETE FROM ledgerflow.workflow_run r USING victims v WHERE r.id = v.id
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM deleted)::int AS runs, (SELECT count(*) FROM archived)::int AS archived,
           (SELECT count(*) FROM effects)::int AS effects`;
}

/** One batch of archive retention: the tombstones of runs finished before the cut-off, oldest first. */
export function pruneArchiveBatchStatement(olderThanMs: number, batchSize: number): RawBuilder<{ runs: number }> {
  return sql<{ runs: number }>`
    WITH expired AS (
      SELECT a.id FROM ledgerflow.run_archive a
       WHERE a.finished_at < statement_timestamp() - ${millis(olderThanMs)}
       ORDER BY a.finished_at, a.id
       LIMIT ${batchSize}
         FOR UPDATE OF a SKIP LOCKED
    ),
    deleted AS (
      DELETE FROM ledgerflow.run_archive a USING expired x WHERE a.id = x.id
      RETURNING 1
    )
    SELECT count(*)::int AS runs FROM deleted`;
}

/**
 * A dry run's page: the next runs (keyset after `after`) a pass would prune, with their recorded
 * ledger rows counted. A parent counts when none of its children must stay (one level).
 */
export function prunableRunsStatement(
  selection: PruneSelection,
  after: { readonly finishedAt: string; readonly id: string } | undefined,
): RawBuilder<{ id: string; finished_at: string; effects: number }> {
  // finished_at as text: a Date would drop its microseconds, and the keyset would find its own row again.
  return sql<{ id: string; finished_at: string; effects: number }>`
    SELECT r.id, r.finished_at::text AS finished_at,
           (SELECT count(*) FROM ledgerflow.step_effect e WHERE e.workflow_id = r.id AND e.status = 'recorded')::int AS effects
      FROM ledgerflow.workflow_run r
     WHERE ${prunableByItself(sql`r`, selection)}
       AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run c
                        WHERE c.parent_run_id = r.id AND (${prunableByItself(sql`c`, selection)}) IS NOT TRUE)
       ${after === undefined ? sql`` : sql`AND (r.finished_at, r.id) > (${after.finishedAt}::timestamptz, ${after.id}::uuid)`}
     ORDER BY r.finished_at, r.id
     LIMIT ${selection.batchSize}`;
}

/** A dry run of archive retention: how many tombstones are past the cut-off. */
export function countArchiveStatement(db: Kysely<LedgerflowDatabase>, olderThanMs: number) {
  return db
    .selectFrom('ledgerflow.run_archive')
    .select(sql<number>`count(*)::int`.as('runs'))
    .where('finished_at', '<', sql<Date>`statement_timestamp() - ${millis(olderThanMs)}`);
}

/** Which events a pass prunes: consumed ones before one cut-off, unconsumed ones before another. */
export interface EventSelection {
  readonly consumed: boolean;
  readonly olderThanMs: number;
}

function eventSelections(selection: PruneSelection): EventSelection[] {
  return [
    ...(selection.eventsOlderThanMs !== undefined ? [{ consumed: true, olderThanMs: selection.eventsOlderThanMs }] : []),
    ...(selection.unconsumedEventsOlderThanMs !== undefined ? [{ consumed: false, olderThanMs: selection.unconsumedEventsOlderThanMs }] : []),
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
export function pruneEventsBatchStatement(which: EventSelection, batchSize: number): RawBuilder<{ events: number; archived: number }> {
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
export function pruneEventArchiveBatchStatement(olderThanMs: number, batchSize: number): RawBuilder<{ events: number }> {
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
