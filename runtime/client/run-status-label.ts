import type { AttemptStatus, CompensationReason, RunStatus } from '../store/tables.js';

/**
 * A run's status as a person reads it in the CLI and the dashboard: a run that is compensating
 * (core 0013: pending or running with `compensation` set) says so and why, e.g.
 * `running, compensating (failure)`; every other run shows its status as it is.
 *
 * @example
 * runStatusLabel({ status: 'pending', compensation: 'cancel' }); // 'pending, compensating (cancel)'
 */
export function runStatusLabel(run: {
  readonly status: RunStatus;
  readonly compensation: CompensationReason | null;
}): string {
  return compensatingReason(run) === undefined ? run.status : `${run.status}, compensating (${run.compensation})`;
}

/** Why the run is compensating right now; `undefined` when it is not (never compensated, or done with it). */
export function compensatingReason(run: {
  readonly status: RunStatus;
  readonly compensation: CompensationReason | null;
}): CompensationReason | undefined {
  if (run.compensation === null || run.status === 'compensated' || run.status === 'compensation_failed')
    return undefined;
  return run.compensation;
}

/** Why a run compensates, as the end of "… because …". */
const COMPENSATION_CAUSE: Readonly<Record<CompensationReason, string>> = {
  failure: 'a step failed for good',
  cancel: 'the run was cancelled',
};

/**
 * Why a run undoes (or undid) its recorded effects and how that went, in words — the stored
 * reason alone (`failure`) reads as "the compensation failed" on a run that was compensated.
 * `undefined` for a run that never compensated.
 *
 * @example
 * compensationText({ status: 'compensated', compensation: 'failure' });
 * // 'undone: a step failed for good, so its recorded effects were undone'
 */
export function compensationText(run: {
  readonly status: RunStatus;
  readonly compensation: CompensationReason | null;
}): string | undefined {
  if (run.compensation === null) return undefined;
  const cause = COMPENSATION_CAUSE[run.compensation];
  if (run.status === 'compensated') return `undone: ${cause}, so its recorded effects were undone`;
  if (run.status === 'compensation_failed')
    return `stopped: ${cause}, and undoing its recorded effects failed (retry it to go on)`;
  return `in progress: ${cause}, so its recorded effects are being undone`;
}

/** An attempt's status as shown: `skipped` for the one attempt of a step its condition skipped (stored as `succeeded`). */
export type ShownAttemptStatus = AttemptStatus | 'skipped';

/**
 * The status to show for `attempt`: a step skipped by its `when` records one succeeded attempt
 * (the decision is checkpointed like an output), which would read as "it ran"; it shows as skipped.
 */
export function shownAttemptStatus(
  attempt: { readonly step_name: string; readonly status: AttemptStatus },
  skipped: ReadonlySet<string>,
): ShownAttemptStatus {
  return attempt.status === 'succeeded' && skipped.has(attempt.step_name) ? 'skipped' : attempt.status;
}

/** The names of the steps of `run` that its conditions skipped. */
export function skippedSteps(run: {
  readonly steps: ReadonlyArray<{ readonly step_name: string; readonly skipped: boolean }>;
}): Set<string> {
  return new Set(run.steps.filter((s) => s.skipped).map((s) => s.step_name));
}
