import {
  CompiledQuery,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
} from 'kysely';
import { Recorded } from '../../contracts/recorded.js';
import { ConflictError } from '../../errors.js';
import type { TransactionalHandler } from '../../contracts/handler-types.js';
import { faultPoint } from '../../faults/fault-points.js';
import type { Json, LedgerflowDatabase } from '../../store/tables.js';
import { matchExisting, openTransactionalEffect, readEffects, type EffectClaim } from '../ledger.js';
import { advanceRun, leaseLost } from '../step-commits.js';
import { StepFailure, userCode } from '../step-errors.js';
import { commitKnowingOutcome, effectClaim, handlerContext, validateOutput, type StepExecution, type StepExecutor, type StepOutcome } from './step-execution.js';

type Handler = TransactionalHandler<unknown, unknown, unknown, unknown>;

/** The step already has a ledger row: the lazy path changed nothing and hands over to {@link inOneTransaction}. */
const EFFECT_EXISTS = Symbol('effect exists');

/**
 * `transactional`: ONE transaction holds the ledger row, the handler's own writes (through
 * `ctx.tx`), the result, the attempt and the run's transition; its last statement is the fenced
 * UPDATE of the run, so a worker that lost its lease rolls everything back, handler writes
 * included. Exactly once: a second transaction for the same key either waits on the first's
 * uncommitted ledger row and then reuses it, or finds it committed and commits no handler write.
 *
 * The transaction is opened lazily: BEGIN and the ledger row go out just before the handler's
 * first statement through `ctx.tx` (round trips: a handler that only records pays none of
 * them). A handler that sends none commits in ONE statement — fenced run transition, ledger
 * row, result and attempt — which moves the run only if the step has no ledger row yet.
 * Where the step already has one, the handler's first `ctx.tx` statement is refused (or, if it
 * sent none, its output is dropped), everything is rolled back, and the step runs again as one
 * transaction opened up front, which reuses the row without calling the handler.
 */
export const executeTransactional: StepExecutor = async (s) => {
  const claim = await effectClaim(s);
  const handler = s.workflow.handler(s.step.name) as Handler;
  const lazily = await commitKnowingOutcome(s, () => s.db.connection().execute((conn) => lazyTransaction(s, claim, handler, conn)), { retry: false });
  if (lazily !== EFFECT_EXISTS) return lazily;
  return commitKnowingOutcome(s, () => inOneTransaction(s, claim, handler), { retry: false });
};

async function callHandler(s: StepExecution, claim: EffectClaim, handler: Handler, tx: unknown): Promise<Json> {
  const recorded = await userCode(() =>
    handler({
      ...handlerContext(s),
      key: claim.key,
      tx: tx as never,
      record: (value: unknown) => new Recorded(value),
    }),
  );
  if (!(recorded instanceof Recorded)) {
    throw new StepFailure(
      new TypeError(`The handler of transactional step "${s.step.name}" must return ctx.record(output), the value it recorded.`),
    );
  }
  await userCode(() => faultPoint('inside-transactional-handler'));
  return validateOutput(s, Recorded.unwrap(recorded));
}

async function lazyTransaction(
  s: StepExecution,
  claim: EffectClaim,
  handler: Handler,
  conn: Kysely<LedgerflowDatabase>,
): Promise<StepOutcome | typeof EFFECT_EXISTS> {
  let began = false;
  let exists = false;
  let openError: unknown;
  let opening: Promise<void> | undefined;
  const open = (): Promise<void> =>
    (opening ??= (async () => {
      try {
        began = true;
        await sql`BEGIN`.execute(conn);
        const opened = await openTransactionalEffect(conn, s.lease, s.step, claim);
        if (!opened.fenced) throw leaseLost(s.lease, 'the transactional step');
        if (!opened.inserted) {
          exists = true;
          throw new Error(`Step "${s.step.name}" of run ${s.run.id} already has a ledger row; the step runs again as one transaction.`);
        }
      } catch (error) {
        openError = error;
        throw error;
      }
    })());
  const rollback = async (): Promise<void> => {
    if (began) await sql`ROLLBACK`.execute(conn).catch(() => {});
  };
  const lazyDb = new Kysely<LedgerflowDatabase>({ dialect: new OnFirstStatementDialect(conn, open) });

  let output: Json;
  try {
    output = await lazyDb.transaction().execute((trx) => callHandler(s, claim, handler, trx));
  } catch (error) {
    await opening?.catch(() => {});
    await rollback();
    if (exists) return EFFECT_EXISTS;
    throw openError ?? error;
  }
  // A handler that did not await its own statement: the transaction may still be opening.
  await opening?.catch(() => {});
  if (exists) {
    await rollback();
    return EFFECT_EXISTS;
  }
  if (openError !== undefined) {
    await rollback();
    throw openError;
  }
  const continuation = s.continuation(output);
  const params = {
    lease: s.lease,
    workflowName: s.run.workflowName,
    workflowVersion: s.run.workflowVersion,
    step: s.step,
    attempt: s.attempt,
    resultAttempt: s.attempt,
    output,
    continuation,
  };
  if (!began) {
    const result = await advanceRun(conn, { ...params, effect: { key: claim.key, insert: { attempt: claim.attempt, requestHash: claim.requestHash } } });
    if (result.effectExists) return EFFECT_EXISTS;
    if (!result.fenced) throw leaseLost(s.lease, 'the transactional step');
    return { kind: 'advanced', output, continuation: continuation.kind, nextAttempt: result.nextAttempt, reused: false, claimed: result.claimed };
  }
  try {
    const result = await advanceRun(conn, { ...params, effect: { key: claim.key, record: { from: 'recorded', attempt: s.attempt } } });
    if (!result.fenced) throw leaseLost(s.lease, 'the transactional step (handler writes included)');
    await sql`COMMIT`.execute(conn);
    return { kind: 'advanced', output, continuation: continuation.kind, nextAttempt: result.nextAttempt, reused: false, claimed: result.claimed };
  } catch (error) {
    await rollback();
    throw error;
  }
}

/** The whole step in one transaction opened up front; used when the step already has a ledger row. */
function inOneTransaction(s: StepExecution, claim: EffectClaim, handler: Handler): Promise<StepOutcome> {
  return s.db.transaction().execute(async (trx): Promise<StepOutcome> => {
    const opened = await openTransactionalEffect(trx, s.lease, s.step, claim);
    if (!opened.fenced) throw leaseLost(s.lease, 'the transactional step');
    let output: Json;
    let reused = false;
    if (opened.inserted) {
      output = await callHandler(s, claim, handler, trx);
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
  });
}

/**
 * `ctx.tx` of the lazy path: a Kysely transaction on the step's pinned connection whose first
 * statement first opens the real transaction (BEGIN, ledger row, fence check). Its own
 * BEGIN/COMMIT/ROLLBACK do nothing: the executor ends the real transaction itself.
 */
class OnFirstStatementDialect implements Dialect {
  constructor(
    private readonly conn: Kysely<LedgerflowDatabase>,
    private readonly open: () => Promise<void>,
  ) {}
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    const connection: DatabaseConnection = {
      executeQuery: async <R>(compiled: CompiledQuery): Promise<QueryResult<R>> => {
        await this.open();
        return this.conn.executeQuery<R>(compiled as CompiledQuery<R>);
      },
      // eslint-disable-next-line require-yield
      streamQuery: async function* <R>(): AsyncIterableIterator<QueryResult<R>> {
        throw new TypeError('ctx.tx of a transactional step does not stream; use execute() instead.');
      },
    };
    return {
      init: async () => {},
      acquireConnection: async () => connection,
      beginTransaction: async () => {},
      commitTransaction: async () => {},
      rollbackTransaction: async () => {},
      releaseConnection: async () => {},
      destroy: async () => {},
    };
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db);
  }
}
