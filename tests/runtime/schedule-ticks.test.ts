import { describe, expect, it } from 'vitest';
import { parseCron } from '../../dsl/cron.js';
import { dueTicks, ON_TIME_MS, tickAfter, upcomingTicks } from '../../runtime/schedules/due-ticks.js';

const iso = (dates: readonly Date[]) => dates.map((d) => d.toISOString());
const at = (text: string) => new Date(text);

/**
 * The tick computation on its own (no database): which ticks a schedule has, in a named time
 * zone across daylight-saving changes, and what each catch-up policy makes of missed ticks.
 */
describe('schedule ticks in a named time zone (Europe/Berlin)', () => {
  it('spring forward: 02:30 does not exist on 2025-03-30 and fires once, at 03:00 CEST', () => {
    const daily = parseCron('30 2 * * *', 'Europe/Berlin');
    expect(iso(upcomingTicks(daily, at('2025-03-28T12:00:00Z'), 4))).toEqual([
      '2025-03-29T01:30:00.000Z', // 02:30 CET
      '2025-03-30T01:00:00.000Z', // 03:00 CEST, the first minute after the gap
      '2025-03-31T00:30:00.000Z', // 02:30 CEST
      '2025-04-01T00:30:00.000Z',
    ]);
  });

  it('fall back: 02:30 happens twice on 2025-10-26 and fires once, the first time', () => {
    const daily = parseCron('30 2 * * *', 'Europe/Berlin');
    expect(iso(upcomingTicks(daily, at('2025-10-24T12:00:00Z'), 4))).toEqual([
      '2025-10-25T00:30:00.000Z', // 02:30 CEST
      '2025-10-26T00:30:00.000Z', // 02:30 CEST; 02:30 CET an hour later does not fire
      '2025-10-27T01:30:00.000Z', // 02:30 CET
      '2025-10-28T01:30:00.000Z',
    ]);
  });

  it('an hourly schedule fires every real hour across both changes: 23 ticks on the short day, 25 on the long one', () => {
    const hourly = parseCron('0 * * * *', 'Europe/Berlin');
    const day = (start: string, end: string) =>
      upcomingTicks(hourly, at(start), 30).filter((t) => t.getTime() < at(end).getTime());
    // Local days: 2025-03-30 00:00 CET = 03-29T23:00Z to 03-31 00:00 CEST = 03-30T22:00Z.
    const short = day('2025-03-29T23:00:00Z', '2025-03-30T22:00:00Z');
    expect(short).toHaveLength(23);
    expect(iso(short.slice(0, 3))).toEqual([
      '2025-03-29T23:00:00.000Z',
      '2025-03-30T00:00:00.000Z',
      '2025-03-30T01:00:00.000Z',
    ]);
    // 2025-10-26 00:00 CEST = 10-25T22:00Z to 10-27 00:00 CET = 10-26T23:00Z; 02:00 happens twice.
    const long = day('2025-10-25T22:00:00Z', '2025-10-26T23:00:00Z');
    expect(long).toHaveLength(25);
    expect(iso(long.slice(3, 6))).toEqual([
      '2025-10-26T01:00:00.000Z',
      '2025-10-26T02:00:00.000Z',
      '2025-10-26T03:00:00.000Z',
    ]);
  });

  it('due ticks across the spring-forward gap: the 03:00 tick is due once, with its own instant', () => {
    const daily = parseCron('30 2 * * *', 'Europe/Berlin');
    const from = at('2025-03-30T01:00:00Z');
    expect(dueTicks(daily, from, at('2025-03-30T01:00:00.400Z'), 'skip')).toEqual({
      start: [from],
      skipped: false,
      next: at('2025-03-31T00:30:00Z'),
    });
  });

  it('the same cron in UTC and in Berlin are an hour apart in winter, two in summer', () => {
    const utc = parseCron('0 9 * * *', 'UTC');
    const berlin = parseCron('0 9 * * *', 'Europe/Berlin');
    expect(
      tickAfter(utc, at('2025-01-15T00:00:00Z'))!.getTime() - tickAfter(berlin, at('2025-01-15T00:00:00Z'))!.getTime(),
    ).toBe(3_600_000);
    expect(
      tickAfter(utc, at('2025-07-15T00:00:00Z'))!.getTime() - tickAfter(berlin, at('2025-07-15T00:00:00Z'))!.getTime(),
    ).toBe(7_200_000);
  });
});

describe('due ticks and the catch-up policies', () => {
  const hourly = parseCron('0 * * * *', 'UTC');
  // Nothing ran from before 09:00 until 12:00:30: 09:00, 10:00 and 11:00 were missed, 12:00 is on time.
  const from = at('2025-01-01T09:00:00Z');
  const now = at('2025-01-01T12:00:30Z');
  const next = at('2025-01-01T13:00:00Z');

  it('a tick is on time up to a minute late', () => {
    expect(ON_TIME_MS).toBe(60_000);
    expect(dueTicks(hourly, at('2025-01-01T12:00:00Z'), at('2025-01-01T12:01:00Z'), 'skip').start).toEqual([
      at('2025-01-01T12:00:00Z'),
    ]);
    expect(dueTicks(hourly, at('2025-01-01T12:00:00Z'), at('2025-01-01T12:01:00.001Z'), 'skip')).toEqual({
      start: [],
      skipped: true,
      next,
    });
  });

  it('nothing is due before the next tick', () => {
    expect(dueTicks(hourly, next, now, 'skip')).toEqual({ start: [], skipped: false, next });
  });

  it("'skip' starts the on-time tick only", () => {
    expect(dueTicks(hourly, from, now, 'skip')).toEqual({ start: [at('2025-01-01T12:00:00Z')], skipped: true, next });
  });

  it("'latest' starts the most recent missed tick when no tick is on time, else the on-time one", () => {
    expect(dueTicks(hourly, from, now, 'latest')).toEqual({ start: [at('2025-01-01T12:00:00Z')], skipped: true, next });
    const late = at('2025-01-01T12:30:00Z');
    expect(dueTicks(hourly, from, late, 'latest')).toEqual({
      start: [at('2025-01-01T12:00:00Z')],
      skipped: true,
      next,
    });
    expect(dueTicks(hourly, at('2025-01-01T12:00:00Z'), late, 'latest')).toEqual({
      start: [at('2025-01-01T12:00:00Z')],
      skipped: false,
      next,
    });
  });

  it('{ all: { max } } starts every missed tick up to max, oldest first, then the on-time one', () => {
    expect(iso(dueTicks(hourly, from, now, { all: { max: 10 } }).start)).toEqual([
      '2025-01-01T09:00:00.000Z',
      '2025-01-01T10:00:00.000Z',
      '2025-01-01T11:00:00.000Z',
      '2025-01-01T12:00:00.000Z',
    ]);
    expect(dueTicks(hourly, from, now, { all: { max: 10 } }).skipped).toBe(false);
    expect(dueTicks(hourly, from, now, { all: { max: 2 } })).toEqual({
      start: [at('2025-01-01T10:00:00Z'), at('2025-01-01T11:00:00Z'), at('2025-01-01T12:00:00Z')],
      skipped: true,
      next,
    });
  });

  it("a year without a worker enumerates the policy's bound and the on-time minute, not every missed tick", () => {
    const everySecond = parseCron('* * * * * *', 'UTC');
    const due = dueTicks(everySecond, at('2024-01-01T00:00:00Z'), at('2025-01-01T00:00:00.500Z'), { all: { max: 3 } });
    // On time: the 60 seconds after 23:59:00.500 (23:59:01 … 00:00:00); missed: the 3 before it.
    expect(due.start).toHaveLength(63);
    expect(due.start[0]).toEqual(at('2024-12-31T23:58:58Z'));
    expect(due.start[3]).toEqual(at('2024-12-31T23:59:01Z'));
    expect(due.start.at(-1)).toEqual(at('2025-01-01T00:00:00Z'));
    expect(due.skipped).toBe(true);
    expect(due.next).toEqual(at('2025-01-01T00:00:01Z'));
  });
});
