import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { parseCron } from '../../dsl/cron.js';
import type { AnySchedule } from '../../dsl/schedule.js';
import { shapeHash } from '../../dsl/workflow-shape.js';
import { MigrationError } from '../errors.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { NO_MORE_TICKS, tickAfter } from './due-ticks.js';
import { withScheduleTable } from './schedule-table.js';

/**
 * Everything that decides which runs a schedule starts — its cron, time zone, catch-up policy,
 * workflow version and the source of its `input` function — hashed. A worker ticks a schedule
 * only while the registered hash is its own: once a deploy registers a changed schedule,
 * workers still running the old code leave it alone.
 */
export function scheduleDefinitionHash(schedule: AnySchedule): string {
  const definition = JSON.stringify([
    schedule.cron,
    schedule.timezone,
    schedule.catchUp,
    schedule.workflow.name,
    schedule.workflow.version,
    schedule.input.toString(),
  ]);
  return createHash('sha256').update(definition).digest('hex').slice(0, 16);
}

/**
 * Throws a TypeError naming the problem when two schedules share a name, or something that is
 * not a `schedule(...)` is given (the worker calls this in its constructor).
 */
export function assertSchedules(schedules: readonly AnySchedule[]): void {
  const seen = new Set<string>();
  for (const [i, s] of schedules.entries()) {
    if (
      typeof s !== 'object' ||
      s === null ||
      typeof s.name !== 'string' ||
      typeof s.input !== 'function' ||
      typeof s.cron !== 'string'
    ) {
      throw new TypeError(
        `schedules[${i}] is not a schedule; declare it with schedule('name', { cron, workflow, input }) from ledgerflow/dsl.`,
      );
    }
    if (seen.has(s.name))
      throw new TypeError(`Schedule "${s.name}" is given twice; give each schedule once, under a unique name.`);
    seen.add(s.name);
  }
}

/**
 * Registers schedules in `ledgerflow.schedule` (what a worker does when it starts): inserts the
 * new ones with their first tick after the database's now, and updates the others to the
 * definition given. A changed cron or time zone starts over from the next tick after now; an
 * unchanged one keeps its next tick (so ticks missed while no worker ran meet the catch-up
 * policy); `paused` is never touched. Refuses (MigrationError, nothing written) if a schedule's
 * workflow version is not migrated as the code declares it.
 */
export async function registerSchedules(
  db: Kysely<LedgerflowDatabase>,
  schedules: readonly AnySchedule[],
): Promise<void> {
  if (schedules.length === 0) return;
  await withScheduleTable(() => upsertSchedules(db, schedules));
}

async function upsertSchedules(db: Kysely<LedgerflowDatabase>, schedules: readonly AnySchedule[]): Promise<void> {
  const versions = await db
    .selectFrom('ledgerflow.workflow_version')
    .select(['workflow_name', 'version', 'definition_hash'])
    .execute();
  const problems: string[] = [];
  for (const s of schedules) {
    const { name, version } = s.workflow;
    const migrated = versions.find((v) => v.workflow_name === name && v.version === version);
    if (migrated === undefined) {
      problems.push(
        `schedule "${s.name}" starts workflow "${name}" v${version}, which is not migrated (run \`ledgerflow codegen\` and \`ledgerflow migrate\`)`,
      );
    } else if (migrated.definition_hash !== shapeHash(s.workflow)) {
      problems.push(
        `schedule "${s.name}" starts workflow "${name}" v${version}, migrated as ${migrated.definition_hash} but the code is ${shapeHash(s.workflow)} ` +
          '(run `ledgerflow codegen` then `ledgerflow migrate`)',
      );
    }
  }
  if (problems.length > 0) throw new MigrationError(`Cannot register the schedules: ${problems.join('; ')}.`);

  const { rows } = await sql<{ now: Date }>`SELECT statement_timestamp() AS now`.execute(db);
  const now = rows[0]!.now;
  const values = schedules.map((s) => ({
    name: s.name,
    cron: s.cron,
    timezone: s.timezone,
    workflow_name: s.workflow.name,
    workflow_version: s.workflow.version,
    catch_up: typeof s.catchUp === 'string' ? s.catchUp : ('all' as const),
    catch_up_max: typeof s.catchUp === 'string' ? null : s.catchUp.all.max,
    definition_hash: scheduleDefinitionHash(s),
    next_tick_at: tickAfter(parseCron(s.cron, s.timezone), now) ?? NO_MORE_TICKS,
  }));
  // Sorted by name: concurrent registrations lock the rows in one order.
  values.sort((a, b) => (a.name < b.name ? -1 : 1));
  const same = (column: 'cron' | 'timezone' | 'definition_hash') =>
    sql<boolean>`ledgerflow.schedule.${sql.ref(column)} = excluded.${sql.ref(column)}`;
  await db
    .insertInto('ledgerflow.schedule')
    .values(values)
    .onConflict((oc) =>
      oc.column('name').doUpdateSet({
        cron: sql`excluded.cron`,
        timezone: sql`excluded.timezone`,
        workflow_name: sql`excluded.workflow_name`,
        workflow_version: sql`excluded.workflow_version`,
        catch_up: sql`excluded.catch_up`,
        catch_up_max: sql`excluded.catch_up_max`,
        definition_hash: sql`excluded.definition_hash`,
        next_tick_at: sql`CASE WHEN ${same('cron')} AND ${same('timezone')} THEN ledgerflow.schedule.next_tick_at ELSE excluded.next_tick_at END`,
        // A new definition gets a fresh start: its predecessor's failures are not its own.
        last_error: sql`CASE WHEN ${same('definition_hash')} THEN ledgerflow.schedule.last_error END`,
        failures: sql`CASE WHEN ${same('definition_hash')} THEN ledgerflow.schedule.failures ELSE 0 END`,
        retry_at: sql`CASE WHEN ${same('definition_hash')} THEN ledgerflow.schedule.retry_at END`,
        registered_at: sql`statement_timestamp()`,
      }),
    )
    .execute();
}
