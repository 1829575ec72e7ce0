import { sql, type Kysely } from 'kysely';
import { parseCron } from '../../dsl/cron.js';
import type { CatchUpPolicy } from '../../dsl/schedule.js';
import { ScheduleNotFoundError } from '../errors.js';
import { NO_MORE_TICKS, tickAfter, upcomingTicks } from '../schedules/due-ticks.js';
import { withScheduleTable } from '../schedules/schedule-table.js';
import type { Json, LedgerflowDatabase, RunStatus } from '../store/tables.js';

/** A registered schedule as `client.listSchedules()` and `ledgerflow schedules` show it. */
export interface ScheduleSummary {
  readonly name: string;
  readonly cron: string;
  readonly timezone: string;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly catchUp: CatchUpPolicy;
  readonly paused: boolean;
  /**
   * The next ticks that will start a run, first the schedule's next unprocessed tick (in the past
   * when it is overdue: no worker has it, or its last tick failed). A paused schedule shows the
   * ticks it would have after a resume now.
   */
  readonly nextTicks: readonly Date[];
  /** The latest tick that started a run, and that run with its status (null once the run is deleted). */
  readonly lastTickAt: Date | null;
  readonly lastRunId: string | null;
  readonly lastRunStatus: RunStatus | null;
  /** The error of the last tick that could not start its run; null after a success. */
  readonly lastError: Json | null;
  readonly failures: number;
  /** When a failing tick is tried again. */
  readonly retryAt: Date | null;
  /** When a worker last registered it (a schedule that no running worker has does not tick). */
  readonly registeredAt: Date;
}

/** Every registered schedule by name, with its next `ticks` ticks (default 3). */
export async function listSchedules(db: Kysely<LedgerflowDatabase>, ticks = 3): Promise<ScheduleSummary[]> {
  const rows = await withScheduleTable(() =>
    db
      .selectFrom('ledgerflow.schedule as s')
      .leftJoin('ledgerflow.workflow_run as r', 'r.id', 's.last_run_id')
      .selectAll('s')
      .select(['r.status as last_run_status', sql<Date>`statement_timestamp()`.as('now')])
      .orderBy('s.name')
      .execute(),
  );
  return rows.map((row) => ({
    name: row.name,
    cron: row.cron,
    timezone: row.timezone,
    workflowName: row.workflow_name,
    workflowVersion: row.workflow_version,
    catchUp: row.catch_up === 'all' ? { all: { max: row.catch_up_max ?? 1 } } : row.catch_up,
    paused: row.paused,
    nextTicks: upcomingTicks(parseCron(row.cron, row.timezone), row.paused ? row.now : row.next_tick_at, ticks),
    lastTickAt: row.last_tick_at,
    lastRunId: row.last_run_id,
    lastRunStatus: row.last_run_status,
    lastError: row.last_error,
    failures: row.failures,
    retryAt: row.retry_at,
    registeredAt: row.registered_at,
  }));
}

/**
 * Pauses a schedule: no worker starts a run for it until it is resumed. A tick being started
 * right now (its row locked) finishes first. Returns false when it was paused already.
 */
export async function pauseSchedule(db: Kysely<LedgerflowDatabase>, name: string): Promise<boolean> {
  const paused = await withScheduleTable(() =>
    db
      .updateTable('ledgerflow.schedule')
      .set({ paused: true })
      .where('name', '=', name)
      .where('paused', '=', false)
      .returning('name')
      .executeTakeFirst(),
  );
  if (paused !== undefined) return true;
  await assertExists(db, name);
  return false;
}

/**
 * Resumes a paused schedule from its next tick after now: ticks that fell while it was paused
 * start nothing (pausing means "not now", not "later"). Returns false when it was not paused.
 */
export async function resumeSchedule(db: Kysely<LedgerflowDatabase>, name: string): Promise<boolean> {
  return db.transaction().execute((trx) => resumeScheduleIn(trx, name));
}

/** {@link resumeSchedule} inside the caller's transaction (an audited resume writes its audit row in it too). */
export async function resumeScheduleIn(trx: Kysely<LedgerflowDatabase>, name: string): Promise<boolean> {
  return withScheduleTable(async () => {
    const row = await trx
      .selectFrom('ledgerflow.schedule')
      .select(['cron', 'timezone', 'paused', sql<Date>`statement_timestamp()`.as('now')])
      .where('name', '=', name)
      .forUpdate()
      .executeTakeFirst();
    if (row === undefined) throw notFound(name);
    if (!row.paused) return false;
    const next = tickAfter(parseCron(row.cron, row.timezone), row.now) ?? NO_MORE_TICKS;
    await trx
      .updateTable('ledgerflow.schedule')
      .set({ paused: false, next_tick_at: next, retry_at: null })
      .where('name', '=', name)
      .execute();
    return true;
  });
}

async function assertExists(db: Kysely<LedgerflowDatabase>, name: string): Promise<void> {
  const row = await db.selectFrom('ledgerflow.schedule').select('name').where('name', '=', name).executeTakeFirst();
  if (row === undefined) throw notFound(name);
}

function notFound(name: string): ScheduleNotFoundError {
  return new ScheduleNotFoundError(
    `No schedule "${name}" is registered in this database. Schedules are registered by the workers given them; ` +
      '`ledgerflow schedules` lists those that are.',
  );
}
