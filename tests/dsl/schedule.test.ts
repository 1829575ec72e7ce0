import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { schedule, workflow, type AnySchedule, type ScheduleContext } from 'ledgerflow/dsl';

/** Declaration-time validation and types of `schedule(...)`. */
const backfill = workflow('backfill', {
  version: 1,
  input: z.object({ day: z.string(), dryRun: z.boolean().default(false) }),
}).step('copy', {
  output: z.object({ copied: z.number() }),
});

const valid = {
  cron: '0 2 * * *',
  workflow: backfill,
  input: ({ scheduledAt }: ScheduleContext) => ({ day: scheduledAt.slice(0, 10) }),
};

describe('schedule()', () => {
  it('returns a frozen definition with UTC and skip by default', () => {
    const nightly = schedule('nightly-backfill', valid);
    expect(nightly).toMatchObject({
      name: 'nightly-backfill',
      cron: '0 2 * * *',
      timezone: 'UTC',
      workflow: backfill,
      catchUp: 'skip',
    });
    expect(Object.isFrozen(nightly)).toBe(true);
    expect(nightly.input({ scheduledAt: '2025-03-30T00:00:00.000Z' })).toEqual({ day: '2025-03-30' });
    expect(
      schedule('six-fields', {
        ...valid,
        cron: '*/10 * * * * *',
        timezone: 'Europe/Berlin',
        catchUp: { all: { max: 24 } },
      }).catchUp,
    ).toEqual({
      all: { max: 24 },
    });
    expect(schedule('nick', { ...valid, cron: '@hourly' }).cron).toBe('@hourly');
  });

  it.each([
    ['Nightly', valid, /Invalid schedule name "Nightly": use lower-case letters/],
    [
      'bad-cron',
      { ...valid, cron: '61 * * * *' },
      /Invalid cron in schedule "bad-cron": "61 \* \* \* \*" — .*minute.*Write 5 fields/,
    ],
    [
      'short-cron',
      { ...valid, cron: '* * *' },
      /Invalid cron in schedule "short-cron": "\* \* \*" — .*Write 5 fields \(minute hour day-of-month month day-of-week/,
    ],
    ['year-cron', { ...valid, cron: '0 0 1 1 * 2030' }, /Invalid cron in schedule "year-cron"/],
    [
      'never',
      { ...valid, cron: '0 0 30 2 *' },
      /Invalid cron in schedule "never": "0 0 30 2 \*" never fires \(no such date\)/,
    ],
    [
      'bad-zone',
      { ...valid, timezone: 'Europe/Nowhere' },
      /Invalid timezone in schedule "bad-zone": "Europe\/Nowhere" is not an IANA time zone; use a name such as "Europe\/Berlin"/,
    ],
    [
      'bad-policy',
      { ...valid, catchUp: 'all' },
      /Invalid catchUp in schedule "bad-policy": use 'skip', 'latest' or \{ all: \{ max: n \} \} with n an integer from 1 to 1000 \(got "all"\)/,
    ],
    [
      'big-policy',
      { ...valid, catchUp: { all: { max: 5_000 } } },
      /Invalid catchUp in schedule "big-policy".*\(got \{"all":\{"max":5000\}\}\)/,
    ],
    [
      'no-input',
      { ...valid, input: undefined },
      /Invalid input in schedule "no-input": must be a function \(\{ scheduledAt \}\)/,
    ],
    [
      'no-workflow',
      { ...valid, workflow: undefined },
      /Invalid workflow in schedule "no-workflow": pass the workflow itself/,
    ],
  ])('refuses %s with a TypeError that says what to write', (name, config, message) => {
    expect(() => schedule(name, config as never)).toThrow(TypeError);
    expect(() => schedule(name, config as never)).toThrow(message);
  });

  it("types input as the workflow's start input, given the tick", () => {
    const nightly = schedule('typed', {
      cron: '0 2 * * *',
      workflow: backfill,
      input: ({ scheduledAt }) => {
        expectTypeOf(scheduledAt).toEqualTypeOf<string>();
        return { day: scheduledAt.slice(0, 10) };
      },
    });
    expectTypeOf(nightly).toExtend<AnySchedule>();
    schedule('typed-wrong', {
      cron: '0 2 * * *',
      workflow: backfill,
      // @ts-expect-error `day` must be a string
      input: ({ scheduledAt }) => ({ day: scheduledAt.length }),
    });
  });
});
