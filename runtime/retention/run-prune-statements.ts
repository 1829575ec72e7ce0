import { sql, type Kysely, type RawBuilder } from 'kysely';
import { FINAL_RUN_STATUSES, type LedgerflowDatabase } from '../store/tables.js';
import { inputHash } from '../store/input-hash.js';
import { millis } from '../store/millis.js';
import { CHILDREN_READ_ON_RETRY, sqlStatusList } from '../store/state-machines.js';
import type { PruneSelection } from './prune-options.js';

/*
 * The statements of run retention (prune.ts says when a run may go and how a pass runs them):
 * a batch that archives and deletes prunable runs, a batch of run-tombstone (run_archive)
 * retention, and a dry run's reads of both. Each batch is one statement, SKIP LOCKED.
 */

/** {@link FINAL_RUN_STATUSES} as a literal SQL list: the planner matches it to the partial index workflow_run_finished_idx. */
const FINAL_SQL = sqlStatusList(FINAL_RUN_STATUSES);
const CHILDREN_READ_ON_RETRY_SQL = sqlStatusList(CHILDREN_READ_ON_RETRY);
/**
 * How many `failed`/`cancelled` ancestors up a child's prune looks to see whether they all go in
 * the pass too; a child with more of them in a row stays (a bound on the statement, not a rule
 * anyone relies on: such chains are kept, never pruned wrongly).
 */
export const RETRY_READ_DEPTH = 3;

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
    levels === 0
      ? sql`false`
      : sql`${finishedBeforeCutOff(p, selection)}
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
export function pruneBatchStatement(
  selection: PruneSelection,
): RawBuilder<{ runs: number; archived: number; effects: number }> {
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
