import type { CompensationReason, RunStatus } from '../store/tables.js';

/**
 * A run's status as a person reads it in the CLI and the dashboard: a run that is compensating
 * (core 0013: pending or running with `compensation` set) says so and why, e.g.
 * `running, compensating (failure)`; every other run shows its status as it is.
 *
 * @example
 * runStatusLabel({ status: 'pending', compensation: 'cancel' }); // 'pending, compensating (cancel)'
 */
export function runStatusLabel(run: { readonly status: RunStatus; readonly compensation: CompensationReason | null }): string {
  return compensatingReason(run) === undefined ? run.status : `${run.status}, compensating (${run.compensation})`;
}

/** Why the run is compensating right now; `undefined` when it is not (never compensated, or done with it). */
export function compensatingReason(run: {
  readonly status: RunStatus;
  readonly compensation: CompensationReason | null;
}): CompensationReason | undefined {
  if (run.compensation === null || run.status === 'compensated' || run.status === 'compensation_failed') return undefined;
  return run.compensation;
}
