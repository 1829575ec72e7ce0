import { faultPoint } from '../../faults/fault-points.js';
import { leaseLost } from '../lease.js';
import { evaluateStepFunction, StepFailure } from '../step-errors.js';
import { openWait, suspendRun, type WaitSpec } from '../wait-commits.js';
import {
  commitKnowingOutcome,
  commitOutput,
  keyContext,
  validateOutput,
  type StepExecution,
  type StepExecutor,
} from './step-execution.js';

/**
 * `sleep`: the first time the run reaches the step its wake-up time is written (`step_wait`,
 * computed on database time) and never computed again; until then the run is `waiting` with
 * `run_after` = that time — no lease, no worker slot, no polling: the claim's index scan stops
 * before it. Once due, one commit records the output `{ until }` and moves on.
 */
export const executeSleep: StepExecutor = async (s) => {
  const spec = await sleepSpec(s);
  const wait = await commitKnowingOutcome(s, () => openWait(s.db, s.lease, s.step.name, spec), { retry: true });
  if (!wait.fenced || wait.until === null) throw leaseLost(s.lease, 'the sleep');
  const until = wait.until.toISOString();
  await faultPoint('before-wait-commit');
  if (wait.due) {
    const output = validateOutput(s, { until });
    return commitKnowingOutcome(s, () => commitOutput(s, output), { retry: true });
  }
  const suspended = await commitKnowingOutcome(
    s,
    () =>
      suspendRun(s.db, {
        lease: s.lease,
        stepName: s.step.name,
        attempt: s.attempt,
        waitingFor: { kind: 'sleep', step: s.step.name, until },
        until: wait.until,
      }),
    { retry: true },
  );
  if (!suspended.fenced) throw leaseLost(s.lease, 'the sleep');
  return { kind: 'suspended', waitingFor: { kind: 'sleep', step: s.step.name, until }, due: suspended.due };
};

/** Evaluates the step's `for` / `until` (pure; the result only counts the first time). */
async function sleepSpec(s: StepExecution): Promise<WaitSpec> {
  const sleep = s.step.sleep!;
  const context = keyContext(s);
  if ('for' in sleep) {
    const ms = evaluateStepFunction(() => sleep.for(context), `The "for" of sleep step "${s.step.name}"`);
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new StepFailure(
        new TypeError(
          `The "for" of sleep step "${s.step.name}" must return a number of milliseconds >= 0 (got ${String(ms)}).`,
        ),
      );
    }
    return { kind: 'sleep', until: { afterMs: ms } };
  }
  const value = evaluateStepFunction(() => sleep.until(context), `The "until" of sleep step "${s.step.name}"`);
  const at = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : undefined;
  if (at === undefined || Number.isNaN(at.getTime())) {
    throw new StepFailure(
      new TypeError(
        `The "until" of sleep step "${s.step.name}" must return a Date or an ISO 8601 string (got ${JSON.stringify(value)}).`,
      ),
    );
  }
  return { kind: 'sleep', until: { at } };
}
