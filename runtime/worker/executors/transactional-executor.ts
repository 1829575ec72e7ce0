import { Recorded } from '../../contracts/recorded.js';
import { ConflictError } from '../../errors.js';
import type { TransactionalHandler } from '../../contracts/handler-types.js';
import { faultPoint } from '../../faults/fault-points.js';
import type { Json } from '../../store/tables.js';
import { matchExisting, openTransactionalEffect, readEffects } from '../ledger.js';
import { advanceRun, leaseLost } from '../step-commits.js';
import { StepFailure, userCode } from '../step-errors.js';
import { commitKnowingOutcome, effectClaim, handlerContext, validateOutput, type StepExecutor, type StepOutcome } from './step-execution.js';

/**
 * `transactional`: ONE transaction holds the ledger row, the handler's own writes (through
 * `ctx.tx`), the result, the attempt and the run's transition; its last statement is the fenced
 * UPDATE of the run, so a worker that lost its lease rolls everything back, handler writes
 * included. Exactly once: a second transaction for the same key either waits on the first's
 * uncommitted ledger row and then reuses it, or finds it committed and runs no handler.
 */
export const executeTransactional: StepExecutor = async (s) => {
  const claim = await effectClaim(s);
  const handler = s.workflow.handler(s.step.name) as TransactionalHandler<unknown, unknown, unknown, unknown>;
  return commitKnowingOutcome(
    s,
    () =>
      s.db.transaction().execute(async (trx): Promise<StepOutcome> => {
        const opened = await openTransactionalEffect(trx, s.lease, s.step, claim);
        if (!opened.fenced) throw leaseLost(s.lease, 'the transactional step');
        let output: Json;
        let reused = false;
        if (opened.inserted) {
          const recorded = await userCode(() =>
            handler({
              ...handlerContext(s),
              key: claim.key,
              tx: trx as never,
              record: (value: unknown) => new Recorded(value),
            }),
          );
          if (!(recorded instanceof Recorded)) {
            throw new StepFailure(
              new TypeError(`The handler of transactional step "${s.step.name}" must return ctx.record(output), the value it recorded.`),
            );
          }
          await userCode(() => faultPoint('inside-transactional-handler'));
          output = validateOutput(s, Recorded.unwrap(recorded));
        } else {
          const rows = opened.existing.length > 0 ? opened.existing : await readEffects(trx, s.run.id, s.step.name);
          const row = await userCode(() => matchExisting(rows, s.step, claim, s.run.id));
          if (row.status !== 'recorded') {
            throw new StepFailure(
              new ConflictError(`Step "${s.step.name}" of run ${s.run.id} has a ${row.status} ${row.kind} ledger row under key "${claim.key}"; a transactional step expects none or a recorded one.`),
            );
          }
          output = row.effect;
          reused = true;
        }
        const continuation = s.continuation(output);
        const result = await advanceRun(trx, {
          lease: s.lease,
          workflowName: s.run.workflowName,
          workflowVersion: s.run.workflowVersion,
          step: s.step,
          attempt: s.attempt,
          resultAttempt: s.attempt,
          output,
          effect: reused ? { key: claim.key } : { key: claim.key, record: { from: 'recorded', attempt: s.attempt } },
          continuation,
        });
        if (!result.fenced) throw leaseLost(s.lease, 'the transactional step (handler writes included)');
        return { kind: 'advanced', output, continuation: continuation.kind, nextAttempt: result.nextAttempt, reused, claimed: result.claimed };
      }),
    { retry: false },
  );
};
