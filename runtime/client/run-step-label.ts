import type { Kysely } from 'kysely';
import type { LedgerflowDatabase, RunStatus } from '../store/tables.js';

/**
 * The step a run is at, as a person reads it in the CLI and the dashboard. `current_step` is a
 * position among the version's step definitions, which count its compensations after its own
 * steps (core 0013), and it moves one past the last when the run is done: a completed run of five
 * steps is at 5, a compensated one past its compensations. The number alone reads as "step 6 of
 * a 5-step workflow"; the label names the step and counts only the workflow's own steps.
 *
 * @example
 * runStepLabel(run, defs); // '4 of 5: confirm', 'done (5 of 5)', 'undoing charge: refund', 'undone'
 */
export function runStepLabel(
  run: {
    readonly workflow_name: string;
    readonly workflow_version: number;
    readonly status: RunStatus;
    readonly current_step: number;
  },
  defs: StepDefsByVersion,
): string {
  const all = defs.get(versionKey(run.workflow_name, run.workflow_version));
  if (all === undefined) return `position ${run.current_step}`;
  const own = all.filter((d) => d.compensates === null).length;
  // A completed run is one past its last step, which is where its first compensation sits.
  if (run.status === 'completed') return `done (${own} of ${own})`;
  if (run.status === 'compensated') return 'undone';
  const at = all.find((d) => d.position === run.current_step);
  if (at === undefined) return `position ${run.current_step}`;
  return at.compensates === null
    ? `${at.position + 1} of ${own}: ${at.step_name}`
    : `undoing ${at.compensates}: ${at.step_name}`;
}

/** One step definition of a workflow version (`ledgerflow.workflow_step_def`). */
export interface StepDef {
  readonly step_name: string;
  readonly position: number;
  /** The step a compensation undoes; `null` for the workflow's own steps. */
  readonly compensates: string | null;
}

/** Step definitions by `name@version`, in position order. */
export type StepDefsByVersion = ReadonlyMap<string, readonly StepDef[]>;

/** The step definitions of the versions `runs` belong to, in one query. */
export async function loadStepDefs(
  db: Kysely<LedgerflowDatabase>,
  runs: ReadonlyArray<{ readonly workflow_name: string; readonly workflow_version: number }>,
): Promise<StepDefsByVersion> {
  const names = [...new Set(runs.map((r) => r.workflow_name))];
  const defs = new Map<string, StepDef[]>();
  if (names.length === 0) return defs;
  const rows = await db
    .selectFrom('ledgerflow.workflow_step_def')
    .select(['workflow_name', 'version', 'step_name', 'position', 'compensates'])
    .where('workflow_name', 'in', names)
    .orderBy('workflow_name')
    .orderBy('version')
    .orderBy('position')
    .execute();
  for (const row of rows) {
    const key = versionKey(row.workflow_name, row.version);
    defs.set(key, [
      ...(defs.get(key) ?? []),
      { step_name: row.step_name, position: row.position, compensates: row.compensates },
    ]);
  }
  return defs;
}

function versionKey(name: string, version: number): string {
  return `${name}@${version}`;
}
