/**
 * The worker's tick loop for the schedules it was given: right after start and then every
 * `intervalMs` (0 turns it off) it runs `runSchedulePass`, which starts the runs of due ticks.
 * Which ticks are due is decided on database time; the interval only says how often to look.
 *
 * Timer (a PeriodicPass): stopped ──start()──▶ ticking ──stop()──▶ stopped. A tick while a pass is still running
 * is skipped (one pass at a time). A schedule that started runs or skipped missed ticks emits
 * `schedule-ticked`; one whose tick could not start emits `schedule-failed` (it is retried after
 * a backoff); a pass that throws emits `error` (where 'schedule') and the next tick tries again.
 * stop() only cancels the ticks: `idle()` waits for the pass in progress, if any.
 */

import type { Kysely } from 'kysely';
import type { AnySchedule } from '../../dsl/schedule.js';
import type { MigratedVersions } from '../client/start-run.js';
import { runSchedulePass } from '../schedules/schedule-pass.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { PeriodicPass } from './periodic-pass.js';
import { serializeError } from './step-errors.js';
import type { WorkerEvent } from './worker-events.js';

export interface ScheduleTimerContext {
  readonly db: Kysely<LedgerflowDatabase>;
  readonly schedules: readonly AnySchedule[];
  readonly intervalMs: number;
  emit(event: WorkerEvent): void;
}

export class ScheduleTimer {
  readonly #ctx: ScheduleTimerContext;
  readonly #passes: PeriodicPass;

  constructor(ctx: ScheduleTimerContext) {
    this.#ctx = ctx;
    const { db, schedules, emit } = ctx;
    const migrated: MigratedVersions = new Set();
    this.#passes = new PeriodicPass(ctx.intervalMs, () =>
      runSchedulePass({ db, schedules, migrated })
        .then(({ ticked, failed }) => {
          for (const t of ticked) {
            if (t.ticks.length === 0 && !t.skipped) continue;
            emit({
              type: 'schedule-ticked',
              schedule: t.schedule,
              ticks: t.ticks.map((tick) => tick.toISOString()),
              runIds: t.runIds,
              skipped: t.skipped,
              nextTickAt: t.nextTickAt,
            });
          }
          for (const f of failed)
            emit({
              type: 'schedule-failed',
              schedule: f.schedule,
              tick: f.tick.toISOString(),
              error: f.error,
              retryAt: f.retryAt,
            });
        })
        .catch((error: unknown) => emit({ type: 'error', where: 'schedule', error: serializeError(error) })),
    );
  }

  start(): void {
    if (this.#ctx.schedules.length > 0) this.#passes.start({ now: true });
  }

  stop(): void {
    this.#passes.stop();
  }

  /** Resolves once no pass is running. */
  async idle(): Promise<void> {
    await this.#passes.idle();
  }
}
