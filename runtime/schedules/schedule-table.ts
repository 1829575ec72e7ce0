import { MigrationError } from '../errors.js';
import { SQLSTATE, sqlStateOf } from '../store/sqlstate.js';

/**
 * Runs `work`, turning a missing `ledgerflow.schedule` — a database migrated by a release before
 * schedules (core 0005), or not at all — into a MigrationError that says what to run, instead of
 * the driver's "relation does not exist".
 */
export async function withScheduleTable<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const state = sqlStateOf(error);
    if (state === SQLSTATE.UNDEFINED_TABLE || state === SQLSTATE.INVALID_SCHEMA_NAME) {
      throw new MigrationError(
        'This database has no ledgerflow.schedule table (core migration 0005) or no ledgerflow schema at all. Run `ledgerflow migrate` first.',
        { cause: error },
      );
    }
    throw error;
  }
}
