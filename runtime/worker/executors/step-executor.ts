import type { StepHandler } from '../../contracts/handler-types.js';
import { faultPoint } from '../../faults/fault-points.js';
import { HandlerTimeoutError } from '../step-errors.js';
import { readOnlyDatabase } from './read-only-db.js';
import type { Json } from '../../store/tables.js';
import {
  bounded,
  commitKnowingOutcome,
  commitOutput,
  handlerContext,
  validateOutput,
  type StepExecution,
  type StepExecutor,
} from './step-execution.js';

/**
 * `step`: run the handler (reading through the read-only `ctx.db` if it likes), validate its output, then ONE commit (one statement): the result,
 * the attempt's success and the run's transition (the next attempt, or completion) — with the
 * results of the plain steps carried before it, if any (carried-prefix.ts). At least once: a
 * crash before the commit reruns the handler; after it, the output is never recomputed.
 */
export const executeStep: StepExecutor = async (s) => {
  const output = await runStepHandler(s);
  return commitKnowingOutcome(s, () => commitOutput(s, output), { retry: true });
};

/**
 * The handler of a plain step under its time limit, its output validated (stored form): all of
 * the step but its commit. The run driver calls it directly for a step whose result it carries
 * to the run's next commit instead of committing it now.
 */
export async function runStepHandler(s: StepExecution): Promise<Json> {
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
  // The result is not durable yet, whether it is committed now or carried.
  await faultPoint('before-step-commit');
  return output;
}
