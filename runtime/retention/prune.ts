import type { Kysely } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';
import { parsePruneOptions, type PruneBatch, type PruneOptions } from './prune-options.js';
import {
  countArchiveStatement,
  prunableRunsStatement,
  pruneArchiveBatchStatement,
  pruneBatchStatement,
} from './run-prune-statements.js';
import {
  countEventArchiveStatement,
  countEventsStatement,
  eventSelections,
  pruneEventArchiveBatchStatement,
  pruneEventsBatchStatement,
} from './event-prune-statements.js';

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
 * parent may go in the same pass (checked up to `RETRY_READ_DEPTH` such parents up, run-prune-statements.ts; a
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
      const row = (await pruneArchiveBatchStatement(options.archiveOlderThanMs, selection.batchSize).execute(db))
        .rows[0]!;
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
      const row = (await pruneEventArchiveBatchStatement(options.archiveOlderThanMs, selection.batchSize).execute(db))
        .rows[0]!;
      if (row.events === 0) break;
      eventArchiveDeleted += row.events;
      batch('event-archive', index, row.events, 0, at);
    }
  }
  return report();
}
