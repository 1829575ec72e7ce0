/*
 * The `transactional` step kind: the handler's writes, the ledger row, the result and the run's
 * transition in one transaction ({@link executeTransactional}); the transaction's own states are
 * step-transaction.ts's.
 */
import { insertStart } from './start-insert.js';
import { Recorded } from '../../contracts/recorded.js';
import { ConflictError } from '../../errors.js';
import type { TransactionalHandler } from '../../contracts/handler-types.js';
import { faultPoint } from '../../faults/fault-points.js';
import type { Json } from '../../store/tables.js';
import { matchExisting, readEffects, type EffectClaim } from '../ledger.js';
import { leaseLost } from '../lease.js';
import { resultCommit } from '../result-commit.js';
import { HandlerTimeoutError, StepFailure, userCode } from '../step-errors.js';
import {
  bounded,
  commitKnowingOutcome,
  effectClaim,
  handlerContext,
  validateOutput,
  type HandlerSignal,
  type StepExecution,
  type StepExecutor,
  type StepOutcome,
} from './step-execution.js';
import { StepTransaction } from './step-transaction.js';

type Handler = TransactionalHandler<unknown, unknown, unknown, unknown>;

/**
 * `transactional`: ONE transaction holds the ledger row, the handler's own writes (through
 * `ctx.tx`), the result, the attempt and the run's transition; its last statement is the fenced
 * UPDATE of the run, so a worker that lost its lease rolls everything back, handler writes
 * included. Exactly once: a second transaction for the same key either waits on the first's
 * uncommitted ledger row and then finds it, or finds it committed and commits no handler write.
 *
 * Two ways to commit, chosen by what the handler does:
 * - it sends nothing through `ctx.tx`: ONE statement (no BEGIN) inserts the ledger row with the
 *   result, attempt and transition — and moves the run only if the step has no ledger row yet;
 * - it sends statements: the transaction opens just before the first (see {@link StepTransaction}),
 *   and the handler's writes, the ledger row and the fenced transition commit together.
 * Either way, a step whose ledger row already exists (recorded) is not run again: its
 * transaction (if any) is rolled back and the recorded output is reused ({@link reuseRecorded}).
 *
 * The handler runs under the step's `timeoutMs`. When the lease is lost or the time is up, the
 * transaction is ended at once — rolled back, or on PostgreSQL its session terminated if a
 * statement of it is stuck (a lock wait) — so a zombie that never returns cannot hold locks its
 * successor waits on; later statements through its `ctx.tx` are refused.
 */
export const executeTransactional: StepExecutor = async (s) => {
  const claim = await effectClaim(s);
  const handler = s.workflow.handler(s.step.name) as Handler;
  const tx = new StepTransaction(s, claim);
  let output: Json;
  try {
    output = await bounded(
      s,
      s.step.timeoutMs,
      () =>
        new HandlerTimeoutError(
          `transactional step "${s.step.name}" did not finish within ${s.step.timeoutMs} ms (timeoutMs); its transaction was rolled back`,
        ),
      'other',
      (signal) => callHandler(s, claim, handler, tx, signal),
    );
    // A handler that did not await its own statement: the transaction may still be opening.
    await tx.opened();
  } catch (error) {
    await tx.abandon();
    if (tx.effectExists) return reuseRecorded(s, claim);
    throw tx.openError ?? error;
  }
  if (tx.effectExists) {
    await tx.abandon();
    return reuseRecorded(s, claim);
  }
  const commit = resultCommit(
    s,
    output,
    tx.began
      ? { key: claim.key, mode: 'fill-recorded', attempt: s.attempt }
      : { key: claim.key, mode: 'insert-recorded', attempt: claim.attempt, requestHash: claim.requestHash },
  );
  // Without a transaction, a start not inserted yet commits alone first (its transaction would have carried it).
  if (!tx.began) await insertStart(s);
  const result = await commitKnowingOutcome(s, () => (tx.began ? tx.commit(commit) : s.commits.advance(commit)), {
    retry: false,
  });
  if (result.effectExists === true) return reuseRecorded(s, claim);
  if (!result.fenced)
    throw leaseLost(s.lease, tx.began ? 'the transactional step (handler writes included)' : 'the transactional step');
  return {
    kind: 'advanced',
    output,
    continuation: commit.continuation.kind,
    nextAttempt: result.nextAttempt,
    reused: false,
    claimed: result.claimed,
    overdue: result.overdue,
  };
};

async function callHandler(
  s: StepExecution,
  claim: EffectClaim,
  handler: Handler,
  tx: StepTransaction,
  signal: HandlerSignal,
): Promise<Json> {
  // ctx.tx is a Kysely `Transaction` over the step's transaction, as the contract says, built
  // only if the handler reads it; once the handler has returned or thrown it refuses statements.
  let recorded: unknown;
  try {
    recorded = await handler(
      handlerContext(s, signal, {
        key: claim.key,
        get tx() {
          return tx.handle as never;
        },
        record: (value: unknown) => new Recorded(value),
      }),
    );
  } catch (error) {
    tx.handlerEnded('rolled back');
    throw error;
  }
  tx.handlerEnded('committed');
  if (!(recorded instanceof Recorded)) {
    throw new StepFailure(
      new TypeError(
        `The handler of transactional step "${s.step.name}" must return ctx.record(output), the value it recorded.`,
      ),
    );
  }
  await faultPoint('inside-transactional-handler');
  return validateOutput(s, Recorded.unwrap(recorded));
}

/**
 * The step already has a ledger row (it was written outside the normal flow, since a step's
 * commit writes it together with the transition): no handler runs; a recorded row under the same
 * key and request is reused as the step's output in one statement, anything else is a conflict.
 */
async function reuseRecorded(s: StepExecution, claim: EffectClaim): Promise<StepOutcome> {
  const rows = await readEffects(s.db, s.run.id, s.step.name);
  const row = await userCode(() => matchExisting(rows, s.step, claim, s.run.id));
  if (row.status !== 'recorded') {
    throw new StepFailure(
      new ConflictError(
        `Step "${s.step.name}" of run ${s.run.id} has a ${row.status} ${row.kind} ledger row under key "${claim.key}"; a transactional step expects none or a recorded one.`,
      ),
    );
  }
  const output = row.effect;
  const commit = resultCommit(s, output, { key: claim.key, mode: 'reference' });
  await insertStart(s);
  const result = await commitKnowingOutcome(s, () => s.commits.advance(commit), { retry: true });
  if (!result.fenced) throw leaseLost(s.lease, 'the transactional step (reusing its ledger row)');
  return {
    kind: 'advanced',
    output,
    continuation: commit.continuation.kind,
    nextAttempt: result.nextAttempt,
    reused: true,
    claimed: result.claimed,
    overdue: result.overdue,
  };
}
