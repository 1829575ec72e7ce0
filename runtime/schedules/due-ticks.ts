// Which ticks of a schedule are due, and what the catch-up policy makes of the missed ones:
// pure functions of the cron, the schedule's next unprocessed tick and the database's "now", so
// every worker computes the same answer (and DST is tested without a database).

import type { Cron } from 'croner';
import type { CatchUpPolicy } from '../../dsl/schedule.js';

/**
 * A tick is on time while it is at most this late when a worker looks at it (one tick-loop
 * interval is normally all it waits); a tick later than that was missed, and the schedule's
 * catch-up policy decides whether it still starts a run.
 */
export const ON_TIME_MS = 60_000;

/**
 * Where a schedule whose cron fires no more waits — the latest instant a Date holds. `schedule()`
 * refuses a cron that never fires, so only a cron that ran out of dates can get there.
 */
export const NO_MORE_TICKS = new Date(8.64e15);

export interface DueTicks {
  /** The ticks to start one run each for, oldest first. */
  readonly start: readonly Date[];
  /** Whether the policy passed over missed ticks (`skip`, `latest`, or beyond `all`'s max). */
  readonly skipped: boolean;
  /** The schedule's next tick: the first one after `now` (null: the cron fires no more). */
  readonly next: Date | null;
}

/**
 * The ticks due at `now` for a schedule whose first unprocessed tick is `from` (a tick of `cron`;
 * due when `from <= now`), after its catch-up policy. Enumerates only the on-time window and at
 * most `max` missed ticks, however long nothing ran.
 *
 * @example
 * // hourly, nothing ran from 09:00 to 12:00:30: 'skip' starts 12:00 only; 'latest' the same;
 * // { all: { max: 2 } } starts 10:00, 11:00 and 12:00 (09:00 is beyond max).
 * dueTicks(parseCron('0 * * * *', 'UTC'), new Date('…T09:00Z'), new Date('…T12:00:30Z'), 'skip');
 */
export function dueTicks(cron: Cron, from: Date, now: Date, policy: CatchUpPolicy): DueTicks {
  const next = tickAfter(cron, now);
  if (from.getTime() > now.getTime()) return { start: [], skipped: false, next: from };
  const onTimeFrom = new Date(Math.max(from.getTime(), now.getTime() - ON_TIME_MS));
  const onTime: Date[] = [];
  for (
    let tick = tickAtOrAfter(cron, onTimeFrom);
    tick !== null && tick.getTime() <= now.getTime();
    tick = tickAfter(cron, tick)
  ) {
    onTime.push(tick);
  }
  // Missed: the ticks in [from, onTimeFrom). Only the few the policy may start are enumerated.
  const wanted = policy === 'skip' ? 0 : policy === 'latest' ? (onTime.length > 0 ? 0 : 1) : policy.all.max;
  const missed = wanted === 0 ? [] : ticksBefore(cron, onTimeFrom, wanted).filter((t) => t.getTime() >= from.getTime());
  const firstMissed = tickAtOrAfter(cron, from);
  const anyMissed = firstMissed !== null && firstMissed.getTime() < onTimeFrom.getTime();
  const skipped = anyMissed && missed[0]?.getTime() !== firstMissed.getTime();
  return { start: [...missed, ...onTime], skipped, next };
}

/** The next `count` ticks from `from` on (inclusive), for listing. */
export function upcomingTicks(cron: Cron, from: Date, count: number): Date[] {
  const ticks: Date[] = [];
  for (let tick = tickAtOrAfter(cron, from); tick !== null && ticks.length < count; tick = tickAfter(cron, tick))
    ticks.push(tick);
  return ticks;
}

/** The first tick strictly after `instant` (ticks are whole seconds). */
export function tickAfter(cron: Cron, instant: Date): Date | null {
  return cron.nextRun(instant);
}

/** The first tick at or after `instant`. */
function tickAtOrAfter(cron: Cron, instant: Date): Date | null {
  // croner drops milliseconds and looks strictly after: start just below the next whole second.
  return cron.nextRun(new Date(Math.ceil(instant.getTime() / 1_000) * 1_000 - 1));
}

/** Up to `count` ticks strictly before `instant`, oldest first. */
function ticksBefore(cron: Cron, instant: Date, count: number): Date[] {
  // croner drops milliseconds and looks strictly before: a tick at a whole second equal to
  // `instant` is not before it, one at the whole second below a fractional `instant` is.
  const reference =
    instant.getTime() % 1_000 === 0 ? instant : new Date(Math.floor(instant.getTime() / 1_000) * 1_000 + 1_000);
  return cron.previousRuns(count, reference).reverse();
}
