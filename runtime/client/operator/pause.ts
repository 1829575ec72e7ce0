import { sql, type Kysely } from 'kysely';
import { QueueNotFoundError } from '../../errors.js';
import type { LedgerflowDatabase } from '../../store/tables.js';
import { pauseSchedule, resumeScheduleIn } from '../schedules.js';
import { audit, checkNote, type OperatorNote } from './operator-action.js';

/**
 * {@link Client.pauseQueue} / {@link Client.resumeQueue}: the queue's exclusive lock and counter row
 * taken first — what every grant takes — so a grant or fast ask that follows a pause sees it; a resume grants at once
 * what the limits allow. `false` when the queue was already so.
 */
export async function setQueuePaused(
  db: Kysely<LedgerflowDatabase>,
  name: string,
  paused: boolean,
  note?: OperatorNote,
): Promise<boolean> {
  const checked = checkNote(note, false);
  return db.transaction().execute(async (trx) => {
    // The queue's exclusive lock first, then its counter row (the order of every grant, core 0022):
    // no fast ask is in progress, and each one after the pause reads it.
    await sql`SELECT ledgerflow.queue_lock(${name})`.execute(trx);
    await sql`SELECT 1 FROM ledgerflow.queue_partition WHERE queue = ${name} AND partition = '' FOR UPDATE`.execute(
      trx,
    );
    const changed = await trx
      .updateTable('ledgerflow.queue')
      .set({ paused })
      .where('name', '=', name)
      .where('paused', '=', !paused)
      .returning('name')
      .executeTakeFirst();
    if (changed === undefined) {
      const exists = await trx
        .selectFrom('ledgerflow.queue')
        .select('name')
        .where('name', '=', name)
        .executeTakeFirst();
      if (exists === undefined) {
        throw new QueueNotFoundError(
          `No queue "${name}" is registered in this database. Queues are registered by the workers that serve workflows using them; ` +
            '`ledgerflow queues` lists those that are.',
        );
      }
      return false;
    }
    const granted = paused
      ? 0
      : (await sql<{ granted: number }>`SELECT ledgerflow.queue_grant(${name}) AS granted`.execute(trx)).rows[0]!
          .granted;
    await audit(trx, checked, {
      action: paused ? 'pause-queue' : 'resume-queue',
      runId: null,
      target: name,
      detail: paused ? {} : { granted },
    });
    return true;
  });
}

/** {@link Client.pauseSchedule} / {@link Client.resumeSchedule} with the audit row in the same transaction. */
export async function setSchedulePaused(
  db: Kysely<LedgerflowDatabase>,
  name: string,
  paused: boolean,
  note?: OperatorNote,
): Promise<boolean> {
  const checked = checkNote(note, false);
  return db.transaction().execute(async (trx) => {
    const changed = paused ? await pauseSchedule(trx, name) : await resumeScheduleIn(trx, name);
    if (changed)
      await audit(trx, checked, {
        action: paused ? 'pause-schedule' : 'resume-schedule',
        runId: null,
        target: name,
        detail: {},
      });
    return changed;
  });
}
