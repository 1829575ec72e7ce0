import { PayloadLimitsCache } from '../limits/limits-cache.js';
import { sql, type Kysely } from 'kysely';
import { parseCron } from '../../dsl/cron.js';
import type { AnySchedule, CatchUpPolicy } from '../../dsl/schedule.js';
import { startRun, type MigratedVersions } from '../client/start-run.js';
import { LedgerflowError } from '../errors.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { serializeError, type SerializedError } from '../worker/step-errors.js';
import { dueTicks, NO_MORE_TICKS } from './due-ticks.js';
import { scheduleDefinitionHash } from './register-schedules.js';

/** A pass stops after this many schedules, so one pass stays short; the next pass goes on. */
const MAX_SCHEDULES_PER_PASS = 100;

/** The dedupe key of a tick's run: the schedule and the tick, so a tick can name one run only. */
export function tickDedupeKey(schedule: string, tick: Date): string {
  return `schedule:${schedule}:${tick.toISOString()}`;
}

export interface SchedulePassOptions {
  readonly db: Kysely<LedgerflowDatabase>;
  /** The schedules this process has in code: only those (with the registered definition) are ticked. */
  readonly schedules: readonly AnySchedule[];
  /** Workflow versions known to be migrated, shared across passes (see `startRun`). */
  readonly migrated: MigratedVersions;
  /** The payload limits, shared across passes (default: read by each pass). */
  readonly limits?: PayloadLimitsCache;
}

export interface ScheduleTicked {
  readonly schedule: string;
  /** The ticks that started a run (or found the run they had already started), oldest first. */
  readonly ticks: readonly Date[];
  readonly runIds: readonly string[];
  /** Missed ticks the catch-up policy passed over. */
  readonly skipped: boolean;
  readonly nextTickAt: Date;
}

export interface ScheduleFailed {
  readonly schedule: string;
  /** The first tick it could not start: it stays due and is tried again after `retryAt`. */
  readonly tick: Date;
  readonly error: SerializedError;
  readonly retryAt: Date;
}

export interface SchedulePassReport {
  readonly ticked: readonly ScheduleTicked[];
  readonly failed: readonly ScheduleFailed[];
}

interface ClaimedSchedule {
  readonly name: string;
  readonly cron: string;
  readonly timezone: string;
  readonly catch_up: 'skip' | 'latest' | 'all';
  readonly catch_up_max: number | null;
  readonly next_tick_at: Date;
  readonly now: Date;
}

/**
 * One pass over the due schedules this process has in code. Per schedule, ONE transaction: take
 * its row (`FOR UPDATE SKIP LOCKED`, due on database time, not paused, not backing off, and
 * registered with this code's definition), compute the ticks due after the catch-up policy,
 * start one run per tick with the dedupe key `schedule:<name>:<tick>` (a tick whose run exists
 * already keeps it), and move `next_tick_at` past now. Another worker skips the locked row, and
 * finds the tick moved once it commits; a worker that dies mid-way moves nothing and starts
 * nothing. So each tick starts one run, across any number of workers and restarts.
 *
 * A tick that cannot start its run (its `input` threw or was invalid) starts nothing of that
 * pass, keeps the schedule where it was and records the error; it is tried again after a
 * backoff (5 s, doubling, at most 10 min), while the other schedules go on.
 */
export async function runSchedulePass({
  db,
  schedules,
  migrated,
  limits = new PayloadLimitsCache(db),
}: SchedulePassOptions): Promise<SchedulePassReport> {
  const ticked: ScheduleTicked[] = [];
  const failed: ScheduleFailed[] = [];
  if (schedules.length === 0) return { ticked, failed };
  const byName = new Map(schedules.map((s) => [s.name, s]));
  const names = schedules.map((s) => s.name);
  const hashes = schedules.map(scheduleDefinitionHash);
  const mine = sql`(s.name, s.definition_hash) IN (SELECT * FROM unnest(${names}::text[], ${hashes}::text[]))`;
  const due = sql`NOT s.paused AND s.next_tick_at <= statement_timestamp() AND (s.retry_at IS NULL OR s.retry_at <= statement_timestamp())`;

  for (let i = 0; i < MAX_SCHEDULES_PER_PASS; i++) {
    // A look without a transaction first: most passes find nothing due and end here.
    const { rows: anyDue } = await sql<{
      name: string;
    }>`SELECT s.name FROM ledgerflow.schedule s WHERE ${due} AND ${mine} LIMIT 1`.execute(db);
    if (anyDue.length === 0) break;
    let claimed: ClaimedSchedule | undefined;
    try {
      const outcome = await db.transaction().execute(async (trx) => {
        const { rows } = await sql<ClaimedSchedule>`
          SELECT s.name, s.cron, s.timezone, s.catch_up, s.catch_up_max, s.next_tick_at, statement_timestamp() AS now
            FROM ledgerflow.schedule s
           WHERE ${due} AND ${mine}
           ORDER BY s.next_tick_at
           LIMIT 1
             FOR UPDATE SKIP LOCKED`.execute(trx);
        claimed = rows[0];
        if (claimed === undefined) return undefined;
        return tickSchedule(trx, claimed, byName.get(claimed.name)!, migrated, limits);
      });
      if (outcome === undefined) break; // due rows exist, but other workers hold them
      ticked.push(outcome);
    } catch (error) {
      // The database's own errors are the pass's; the schedule's (its input, the run it starts) are recorded on it.
      const row = claimed as ClaimedSchedule | undefined;
      if (row === undefined || !(error instanceof LedgerflowError || error instanceof ScheduleInputError)) throw error;
      failed.push(await recordFailure(db, row, error));
    }
  }
  return { ticked, failed };
}

/** A schedule's `input` function threw: the schedule's failure, recorded on it, not the pass's. */
class ScheduleInputError extends Error {
  override readonly name = 'ScheduleInputError';
}

async function tickSchedule(
  trx: Kysely<LedgerflowDatabase>,
  row: ClaimedSchedule,
  schedule: AnySchedule,
  migrated: MigratedVersions,
  limits: PayloadLimitsCache,
): Promise<ScheduleTicked> {
  const policy: CatchUpPolicy = row.catch_up === 'all' ? { all: { max: row.catch_up_max ?? 1 } } : row.catch_up;
  const { start, skipped, next } = dueTicks(parseCron(row.cron, row.timezone), row.next_tick_at, row.now, policy);
  const keys = start.map((tick) => tickDedupeKey(row.name, tick));
  const existing =
    keys.length === 0
      ? []
      : await trx
          .selectFrom('ledgerflow.workflow_run')
          .select(['id', 'dedupe_key'])
          .where('workflow_name', '=', schedule.workflow.name)
          .where('dedupe_key', 'in', keys)
          .execute();
  const runIds: string[] = [];
  for (const [i, tick] of start.entries()) {
    const found = existing.find((r) => r.dedupe_key === keys[i]);
    if (found !== undefined) {
      runIds.push(found.id);
      continue;
    }
    let input: unknown;
    try {
      input = schedule.input({ scheduledAt: tick.toISOString() });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new ScheduleInputError(
        `The input function of schedule "${row.name}" threw for the tick ${tick.toISOString()}: ${message}`,
        { cause: error },
      );
    }
    const { runId } = await startRun(trx, schedule.workflow, input, { dedupeKey: keys[i]! }, migrated, limits);
    runIds.push(runId);
  }
  const nextTickAt = next ?? NO_MORE_TICKS;
  const lastTick = start.at(-1);
  await trx
    .updateTable('ledgerflow.schedule')
    .set({
      next_tick_at: nextTickAt,
      ...(lastTick !== undefined ? { last_tick_at: lastTick, last_run_id: runIds.at(-1)! } : {}),
      last_error: null,
      failures: 0,
      retry_at: null,
    })
    .where('name', '=', row.name)
    .execute();
  return { schedule: row.name, ticks: start, runIds, skipped, nextTickAt };
}

/** Keeps the schedule where it was (guarded by the tick it was at), with the error and a backoff. */
async function recordFailure(
  db: Kysely<LedgerflowDatabase>,
  row: ClaimedSchedule,
  error: unknown,
): Promise<ScheduleFailed> {
  const serialized = serializeError(error);
  const updated = await db
    .updateTable('ledgerflow.schedule')
    .set({
      last_error: JSON.stringify(serialized),
      failures: sql<number>`failures + 1`,
      retry_at: sql<Date>`statement_timestamp() + least(600000, 5000 * power(2, least(failures, 20))) * interval '1 millisecond'`,
    })
    .where('name', '=', row.name)
    .where('next_tick_at', '=', row.next_tick_at)
    .returning('retry_at')
    .executeTakeFirst();
  return { schedule: row.name, tick: row.next_tick_at, error: serialized, retryAt: updated?.retry_at ?? row.now };
}
