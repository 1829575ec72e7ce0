import { MAX_CORRELATION_KEY_LENGTH } from '../../client/send-event.js';
import { faultPoint } from '../../faults/fault-points.js';
import type { WaitingFor } from '../../store/tables.js';
import { leaseLost } from '../lease.js';
import { evaluateStepFunction, StepFailure } from '../step-errors.js';
import { openWait, resolveWaitStatement, suspendRun, takeEvent } from '../wait-commits.js';
import { lockEventKeyStatement } from '../../store/event-key-lock.js';
import {
  commitKnowingOutcome,
  commitOutput,
  keyContext,
  validateOutput,
  type StepExecution,
  type StepExecutor,
} from './step-execution.js';

/**
 * `waitFor`: one transaction, serialized with every sender of this event name and key
 * (`lockEventKeyStatement`). It records the wait the first time (the timeout is fixed then),
 * then takes the oldest event nobody has taken — stored before the run got here or since — and
 * completes the step with it in the same commit (the event is consumed exactly when the step
 * completes); or, past the timeout, completes it with `{ status: 'timeout' }`; or parks the run
 * `waiting` until the timeout. A sender that comes later finds the parked run and wakes it.
 */
export const executeWaitFor: StepExecutor = async (s) => {
  const wait = s.step.wait!;
  const key = await correlationKey(s);
  return commitKnowingOutcome(
    s,
    () =>
      s.db.transaction().execute(async (trx) => {
        await lockEventKeyStatement(wait.event.name, key).execute(trx);
        const opened = await openWait(trx, s.lease, s.step.name, {
          kind: 'event',
          event: wait.event.name,
          key,
          timeoutMs: wait.timeoutMs,
        });
        if (!opened.fenced) throw leaseLost(s.lease, 'the wait');
        const taken = await takeEvent(trx, s.lease, s.step.name, wait.event.name, key);
        await faultPoint('before-wait-commit');
        if (taken !== undefined || opened.due) {
          await resolveWaitStatement(s.lease, s.step.name).execute(trx);
          const output = validateOutput(
            s,
            taken !== undefined
              ? {
                  status: 'received',
                  payload: taken.payload,
                  eventId: taken.id,
                  receivedAt: taken.createdAt.toISOString(),
                }
              : { status: 'timeout', timedOutAt: opened.until!.toISOString() },
          );
          return commitOutput(s, output, trx);
        }
        const waitingFor: WaitingFor = {
          kind: 'event',
          step: s.step.name,
          event: wait.event.name,
          key,
          until: opened.until?.toISOString() ?? null,
        };
        const suspended = await suspendRun(trx, {
          lease: s.lease,
          stepName: s.step.name,
          attempt: s.attempt,
          waitingFor,
          until: opened.until,
        });
        if (!suspended.fenced) throw leaseLost(s.lease, 'the wait');
        return { kind: 'suspended' as const, waitingFor, due: suspended.due };
      }),
    { retry: true },
  );
};

/** `match` (pure, checked like a key), or the run id for a step that waits for a signal. */
async function correlationKey(s: StepExecution): Promise<string> {
  const match = s.step.wait!.match;
  if (match === undefined) return s.run.id;
  const context = keyContext(s);
  const key = evaluateStepFunction(() => match(context), `The match function of step "${s.step.name}"`);
  if (typeof key !== 'string' || key === '' || key.length > MAX_CORRELATION_KEY_LENGTH) {
    throw new StepFailure(
      new TypeError(
        `The match function of step "${s.step.name}" must return a non-empty string of at most ${MAX_CORRELATION_KEY_LENGTH} characters (got ${JSON.stringify(key)}).`,
      ),
    );
  }
  return key;
}
