import { z } from 'zod';
import { ALWAYS_CHECKED, checkOptions, integer, rule } from '../../dsl/option-checks.js';
import { ValidationError } from '../errors.js';
import { FINAL_RUN_STATUSES, type FinalRunStatus } from '../store/tables.js';

/*
 * What a prune pass (prune.ts) is asked, and what it reports after each batch: the options,
 * checked before anything is read or deleted, and the selection the statements are built from
 * (run-prune-statements.ts, event-prune-statements.ts). The worker's `retention` option takes
 * the same ages (`retentionMilliseconds`). No state.
 */

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

/** A retention option's age: finite and >= 0 (the worker's `retention` takes the same). */
export const retentionMilliseconds = rule(z.number().min(0), 'must be a number of milliseconds >= 0');

/** What {@link PruneOptions} allow; the archive must outlive what it protects the keys of. */
const pruneOptionsSchema = z
  .object({
    olderThanMs: retentionMilliseconds,
    batchSize: rule(
      integer().min(1).max(MAX_PRUNE_BATCH_SIZE),
      `must be an integer from 1 to ${MAX_PRUNE_BATCH_SIZE}`,
    ).optional(),
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
    (problems) =>
      new ValidationError(
        `Invalid prune options:\n${problems.map((p) => `  - ${p}`).join('\n')}\nNothing was pruned.`,
        problems,
      ),
    { separator: ': ' },
  );
  const { olderThanMs, eventsOlderThanMs, unconsumedEventsOlderThanMs } = options;
  const statuses = options.statuses ?? FINAL_RUN_STATUSES;
  return {
    olderThanMs,
    batchSize: options.batchSize ?? DEFAULT_PRUNE_BATCH_SIZE,
    statuses: [...new Set(statuses)],
    eventsOlderThanMs,
    unconsumedEventsOlderThanMs,
  };
}

/** A number of milliseconds a retention option may hold: finite and >= 0. */
function isDuration(ms: unknown): ms is number {
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0;
}
