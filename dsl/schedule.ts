import { z } from 'zod';
import { checkOptions, integer, rule } from './option-checks.js';
import { isTimeZone, parseCron } from './cron.js';
import type { AnyWorkflow, WorkflowStartInput } from './workflow.js';

/** A schedule name: lower-case letters, digits, `.`, `_` and `-`, starting with a letter; at most 63 characters. */
export const SCHEDULE_NAME = /^[a-z][a-z0-9._-]{0,62}$/;

/** The most missed ticks `catchUp: { all: { max } }` may start at once. */
export const MAX_CATCH_UP = 1_000;

/**
 * What happens to ticks that were missed — due more than a minute before any worker looked,
 * because none ran (a deploy, an outage). Ticks that are on time always start their run.
 *
 * - `'skip'` (the default): missed ticks start nothing; the schedule goes on with the next tick.
 * - `'latest'`: the most recent missed tick starts its run (once), unless an on-time tick is due too.
 * - `{ all: { max } }`: every missed tick starts its run, oldest first, but at most the `max`
 *   most recent ones (1 to 1000).
 */
export type CatchUpPolicy = 'skip' | 'latest' | { readonly all: { readonly max: number } };

/** What a schedule's `input` function is given for one tick. */
export interface ScheduleContext {
  /** The tick, as an ISO 8601 UTC instant (`2025-03-30T01:00:00.000Z`): the same on every worker and retry. */
  readonly scheduledAt: string;
}

export interface ScheduleConfig<W extends AnyWorkflow> {
  /** 5 fields (`0 2 * * *`: 02:00 daily) or 6 with seconds first; nicknames like `@hourly` too. */
  readonly cron: string;
  /** IANA time zone the cron is read in (`Europe/Berlin`). Default `UTC`. */
  readonly timezone?: string;
  /** The workflow each tick starts one run of (the version given here). */
  readonly workflow: W;
  /**
   * The run's start input for a tick. Build it from `scheduledAt` (not from the clock), so the
   * run of a late or caught-up tick works on the period it was meant for.
   */
  readonly input: (ctx: ScheduleContext) => WorkflowStartInput<W>;
  /** Ticks missed while no worker ran. Default `'skip'`. */
  readonly catchUp?: CatchUpPolicy;
}

/**
 * A schedule: a cron expression that starts one run of a workflow per tick. Workers given it
 * (`createWorker({ schedules })`, or a `schedules` export next to `workflows` for
 * `ledgerflow worker`) register it in the database; whichever worker finds a tick due starts
 * its run, with the dedupe key `schedule:<name>:<tick>`, in the transaction that moves the
 * schedule on — so each tick yields exactly one run, whatever workers and restarts do.
 *
 * @example
 * export const nightlyBackfill = schedule('nightly-backfill', {
 *   cron: '0 2 * * *',
 *   timezone: 'Europe/Berlin',
 *   workflow: dataBackfill,
 *   input: ({ scheduledAt }) => ({ day: scheduledAt.slice(0, 10) }),
 *   catchUp: 'latest',
 * });
 */
export interface ScheduleDefinition<W extends AnyWorkflow = AnyWorkflow> {
  readonly name: string;
  readonly cron: string;
  readonly timezone: string;
  readonly workflow: W;
  readonly input: (ctx: ScheduleContext) => WorkflowStartInput<W>;
  readonly catchUp: CatchUpPolicy;
}

/** Any schedule, whatever its workflow. */
export type AnySchedule = ScheduleDefinition<AnyWorkflow>;

/** What a schedule's `input` and `catchUp` allow (its name, zone, cron and workflow are checked one by one, each in its own words). */
const scheduleConfigSchema = z.object({
  input: z.custom(
    (value) => typeof value === 'function',
    "must be a function ({ scheduledAt }) => the workflow's start input",
  ),
  catchUp: rule(
    z.union([
      z.literal('skip'),
      z.literal('latest'),
      z.object({ all: z.object({ max: integer().min(1).max(MAX_CATCH_UP) }) }),
    ]),
    `use 'skip', 'latest' or { all: { max: n } } with n an integer from 1 to ${MAX_CATCH_UP}`,
  ).optional(),
});

/** Declares a schedule; a bad name, cron, time zone or policy throws a TypeError saying what to write instead. */
export function schedule<W extends AnyWorkflow>(name: string, config: ScheduleConfig<W>): ScheduleDefinition<W> {
  if (!SCHEDULE_NAME.test(name)) {
    throw new TypeError(
      `Invalid schedule name "${name}": use lower-case letters, digits, ".", "_" and "-", starting with a letter (max 63).`,
    );
  }
  const where = `schedule "${name}"`;
  const timezone = config.timezone ?? 'UTC';
  if (typeof timezone !== 'string' || !isTimeZone(timezone)) {
    throw new TypeError(
      `Invalid timezone in ${where}: "${String(timezone)}" is not an IANA time zone; use a name such as "Europe/Berlin" or "UTC".`,
    );
  }
  if (typeof config.cron !== 'string') {
    throw new TypeError(`Invalid cron in ${where}: must be a string such as "0 2 * * *" (02:00 every day).`);
  }
  let next: Date | null;
  try {
    next = parseCron(config.cron, timezone).nextRun();
  } catch (error) {
    throw new TypeError(
      `Invalid cron in ${where}: "${config.cron}" — ${error instanceof Error ? error.message : String(error)}. ` +
        'Write 5 fields (minute hour day-of-month month day-of-week, e.g. "0 2 * * *") or 6 with seconds first.',
      { cause: error },
    );
  }
  if (next === null) {
    throw new TypeError(
      `Invalid cron in ${where}: "${config.cron}" never fires (no such date); check its day and month fields.`,
    );
  }
  const workflow = config.workflow as AnyWorkflow | undefined;
  if (
    workflow === undefined ||
    typeof workflow.name !== 'string' ||
    typeof workflow.version !== 'number' ||
    !Array.isArray(workflow.steps)
  ) {
    throw new TypeError(
      `Invalid workflow in ${where}: pass the workflow itself (the const declared with workflow(...)).`,
    );
  }
  checkOptions(
    scheduleConfigSchema,
    config,
    (_lines, [first]) => new TypeError(`Invalid ${first!.name} in ${where}: ${first!.says}.`),
    { show: JSON.stringify },
  );
  const catchUp = config.catchUp ?? 'skip';
  return Object.freeze({
    name,
    cron: config.cron,
    timezone,
    workflow: config.workflow,
    input: config.input,
    catchUp: typeof catchUp === 'string' ? catchUp : Object.freeze({ all: Object.freeze({ max: catchUp.all.max }) }),
  });
}
