import { resolve } from 'node:path';
import type { AnySchedule } from '../../dsl/schedule.js';
import { UsageError } from './command.js';
import { importUserModule } from './import-user-module.js';
import { WorkflowModuleError } from './load-workflows.js';

/**
 * The optional `schedules` export of a worker's `--workflows` module (loaded before by
 * `loadWorkflowsModule`, so this import is the cached module): an array of `schedule(...)`
 * declarations, or a function returning one (possibly async). None: an empty list.
 *
 * @example
 * // examples/workflows.ts
 * export const workflows = [dataBackfillRegistration()];
 * export const schedules = [nightlyBackfill];
 */
export async function loadSchedulesExport(path: string): Promise<AnySchedule[]> {
  const module = await importUserModule(resolve(path), `--workflows ${path}`);
  let exported = module['schedules'];
  if (exported === undefined) return [];
  if (typeof exported === 'function') {
    try {
      exported = await (exported as () => unknown)();
    } catch (error) {
      throw new WorkflowModuleError(
        `The schedules() function of ${path} failed: ${error instanceof Error ? error.message : String(error)}`,
        {
          cause: error,
        },
      );
    }
  }
  if (!Array.isArray(exported)) {
    throw new UsageError(
      `The "schedules" export of ${path} must be an array of schedule(...) declarations (or a function returning one).`,
    );
  }
  return exported.map((entry: unknown, i) => {
    if (isSchedule(entry)) return entry;
    throw new UsageError(
      `schedules[${i}] in ${path} is not a schedule; declare it with schedule('name', { cron, workflow, input }) from ledgerflow/dsl.`,
    );
  });
}

function isSchedule(value: unknown): value is AnySchedule {
  if (typeof value !== 'object' || value === null) return false;
  const s = value as Partial<Record<keyof AnySchedule, unknown>>;
  return (
    typeof s.name === 'string' &&
    typeof s.cron === 'string' &&
    typeof s.timezone === 'string' &&
    typeof s.input === 'function'
  );
}
