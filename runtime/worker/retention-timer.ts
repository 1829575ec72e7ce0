/**
 * The worker's retention passes (`WorkerOptions.retention`): every `intervalMs` it runs
 * `pruneRuns` (runtime/retention/prune.ts), deleting finished runs older than
 * `completedOlderThanMs` in batches and keeping their identity in the archive (and, with
 * `eventsOlderThanMs`, events consumed that long ago). Any number of
 * workers may do this at once: batches take their runs with SKIP LOCKED, so passes share the work.
 *
 * Timer (a PeriodicPass): stopped ──start()──▶ ticking ──stop()──▶ stopped. A tick while a pass is still running
 * is skipped (one pass at a time). A pass that pruned anything emits `prune-pass`; a pass that
 * throws emits `error` (where 'prune') and the next tick tries again. stop() cancels the ticks and
 * aborts the pass in progress between two batches; `idle()` waits for it to end.
 */

import type { Kysely } from 'kysely';
import { z } from 'zod';
import { integer, rule } from '../../dsl/option-checks.js';
import { pruneRuns } from '../retention/prune.js';
import { retentionMilliseconds } from '../retention/prune-options.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { PeriodicPass } from './periodic-pass.js';
import { serializeError } from './step-errors.js';
import type { WorkerEvent } from './worker-events.js';

/** `WorkerOptions.retention`. */
export interface RetentionOptions {
  /** Prune runs that finished at least this long ago (database time). */
  readonly completedOlderThanMs: number;
  /** How often a pass runs. Default 600 000 (10 minutes). */
  readonly intervalMs?: number;
  /** Runs deleted per batch (one short transaction each). Default 1 000. */
  readonly batchSize?: number;
  /**
   * Also delete events consumed at least this long ago (a dedupe key stays in the archive, so the
   * same send stores nothing). Default: events are kept.
   */
  readonly eventsOlderThanMs?: number;
}

export const DEFAULT_RETENTION_INTERVAL_MS = 600_000;

/** What {@link RetentionOptions} allow (checked with the worker's options). */
export const retentionOptionsSchema = z.object({
  completedOlderThanMs: retentionMilliseconds,
  eventsOlderThanMs: retentionMilliseconds.optional(),
  intervalMs: rule(z.number().gt(0), 'must be > 0').optional(),
  batchSize: rule(integer().min(1).max(10_000), 'must be an integer from 1 to 10000').optional(),
});

export interface RetentionTimerContext {
  readonly db: Kysely<LedgerflowDatabase>;
  readonly retention: RetentionOptions | undefined;
  emit(event: WorkerEvent): void;
}

export class RetentionTimer {
  readonly #passes: PeriodicPass | undefined;

  constructor(ctx: RetentionTimerContext) {
    const { retention, db, emit } = ctx;
    if (retention === undefined) return;
    this.#passes = new PeriodicPass(retention.intervalMs ?? DEFAULT_RETENTION_INTERVAL_MS, (signal) =>
      pruneRuns(db, {
        olderThanMs: retention.completedOlderThanMs,
        ...(retention.batchSize !== undefined ? { batchSize: retention.batchSize } : {}),
        ...(retention.eventsOlderThanMs !== undefined ? { eventsOlderThanMs: retention.eventsOlderThanMs } : {}),
        signal,
      })
        .then((report) => {
          if (report.runsPruned > 0 || report.eventsPruned > 0) emit({ type: 'prune-pass', report });
        })
        .catch((error: unknown) => emit({ type: 'error', where: 'prune', error: serializeError(error) })),
    );
  }

  start(): void {
    this.#passes?.start();
  }

  stop(): void {
    this.#passes?.stop();
  }

  /** Resolves once no pass is running. */
  async idle(): Promise<void> {
    await this.#passes?.idle();
  }
}
