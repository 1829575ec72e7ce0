import type { StepHandler } from '../../contracts/handler-types.js';
import { faultPoint } from '../../faults/fault-points.js';
import { HandlerTimeoutError } from '../step-errors.js';
import { readOnlyDatabase } from './read-only-db.js';
import { bounded, commitKnowingOutcome, commitOutput, handlerContext, validateOutput, type StepExecutor } from './step-execution.js';

/**
 * `step`: run the handler (reading through the read-only `ctx.db` if it likes), validate its output, then ONE commit (one statement): the result,
 * the attempt's success and the run's transition (the next attempt, or completion). At least
 * once: a crash before the commit reruns the handler; after it, the output is never recomputed.
 */
export const executeStep: StepExecutor = async (s) => {
  const handler = s.workflow.handler(s.step.name) as StepHandler<unknown, unknown, unknown>;
  // Built when the handler first reads ctx.db: most steps never do.
  let db: ReturnType<typeof readOnlyDatabase> | undefined;
  const value = await bounded(
    s,
    s.step.timeoutMs,
    () => new HandlerTimeoutError(`step "${s.step.name}" did not finish within ${s.step.timeoutMs} ms (timeoutMs)`),
    'other',
    (signal) =>
      handler(
        handlerContext(s, signal, {
          get db() {
            return (db ??= readOnlyDatabase(s.db, s.step.name));
          },
        }),
      ),
  );
  const output = validateOutput(s, value);
  await faultPoint('before-step-commit');
  return commitKnowingOutcome(s, () => commitOutput(s, output), { retry: true });
};
