import { sql, type CompiledQuery, type Kysely, type QueryResult, type RawBuilder, type Transaction } from 'kysely';
import type { LedgerflowDatabase } from '../../store/tables.js';
import type { PendingStart } from '../../store/leased-run.js';
import { faultPoint } from '../../faults/fault-points.js';
import {
  openingStatement,
  toOpenedTransactionalEffect,
  type EffectClaim,
  type OpenedTransactionalEffect,
  type OpeningRow,
} from '../ledger.js';
import { CarriedPastDeadline, type Carry, type FlushParams } from '../carried-prefix.js';
import { advanceResultOf, advanceRunStatement } from '../step-commits.js';
import { isUnfencedStepCommit } from '../commit-statement.js';
import { leaseLost } from '../lease.js';
import type { AdvanceParams, AdvanceResult, AdvanceRow } from '../result-commit.js';
import type { StepExecution } from './step-execution.js';
import { transactionHandle, type TransactionHandle } from './statement-dialect.js';

/**
 * The transaction of one `transactional` step attempt, opened lazily.
 *
 * States:
 *   idle        --first statement through ctx.tx-->  opening   (a connection is taken from the store)
 *   opening     --BEGIN + timeouts, ledger row inserted, fence ok-->  open
 *   opening     --the step already has a ledger row, the fence failed, an error-->  closed (rolled back)
 *   open        --commit(): fenced transition-->  committing  --COMMIT-->  closed
 *   committing  --the transition or COMMIT failed-->  open, then abandoned
 *   idle/opening/open  --abandon(): lease lost, time up, handler threw-->  closed (rolled back; a
 *                stuck handler statement's session terminated on PostgreSQL)
 * A statement sent through ctx.tx once the transaction is closed (a zombie handler that kept
 * going) is refused; it can never run outside the step's transaction.
 *
 * One rule keeps every statement inside the transaction: only the code that owns the connection
 * at the moment sends on it, and the connection goes back to the pool only after the ROLLBACK
 * (or COMMIT) that ends the transaction. Abandoning while the transaction is still opening
 * therefore does not roll back beside the opening: opening checks the state before each of its
 * statements and stops, and abandon() waits for it, then rolls back. (It once did roll back at
 * once: the opening's ledger INSERT, sent after that ROLLBACK, committed on its own and left a
 * recorded row with no handler write — seen only when a failover made a worker give up a lease
 * the database still held, so that the INSERT passed the fence.)
 *
 * The connection is held only from the first statement to the end, so a handler that sends
 * nothing through `ctx.tx` pins none — on PGlite, whose single connection heartbeats, claims
 * and `client.start` share, that matters. Inside the transaction, `lock_timeout` (one lease)
 * bounds how long it waits on another session's locks, and `idle_in_transaction_session_timeout`
 * (the step's time limit plus one lease) lets the server end a session whose worker froze.
 */
export class StepTransaction {
  /** The step already had a ledger row: nothing of this transaction may commit. */
  effectExists = false;
  /** Why opening failed (a lost fence, a database error), to report instead of what the handler made of it. */
  openError: unknown;

  #state: 'idle' | 'opening' | 'open' | 'committing' | 'closed' = 'idle';
  #opening: Promise<void> | undefined;
  /** The rollback that ends the transaction, once one is under way (by abandon() or a failed opening). */
  #ending: Promise<void> | undefined;
  #conn: Kysely<LedgerflowDatabase> | undefined;
  #release: (() => void) | undefined;
  #pid: number | undefined;
  #statementsInFlight = 0;
  #handle: TransactionHandle | undefined;
  #handlerEnded: 'committed' | 'rolled back' | undefined;
  /** The carried steps this transaction wrote when it opened: written for good at its COMMIT. */
  #carried: Carry | undefined;
  /** This transaction inserted the run its start handed over uninserted (`PendingStart`): told how it ended. */
  #insertsStart = false;
  /** Its COMMIT was answered. */
  #committed = false;

  constructor(
    private readonly s: StepExecution,
    private readonly claim: EffectClaim,
  ) {}

  /**
   * ctx.tx: a Kysely `Transaction` whose every statement goes through {@link StepTransaction.#execute}.
   * Built when the handler first reads it: a handler that only records its output pays nothing for it.
   */
  get handle(): Transaction<unknown> {
    if (this.#handle === undefined) {
      this.#handle = transactionHandle((compiled) => this.#execute(compiled), `ctx.tx of step "${this.s.step.name}"`);
      if (this.#handlerEnded !== undefined) this.#handle.end(this.#handlerEnded);
    }
    return this.#handle.handle;
  }

  /**
   * The handler returned (`committed`) or threw (`rolled back`): statements it sends through
   * ctx.tx from now on are refused, as Kysely refuses them on a transaction whose callback ended;
   * one already on its way finishes (see {@link StepTransaction.opened}).
   */
  handlerEnded(status: 'committed' | 'rolled back'): void {
    this.#handlerEnded ??= status;
    this.#handle?.end(status);
  }

  /** Whether the handler sent anything, i.e. whether a transaction was (or is being) opened. */
  get began(): boolean {
    return this.#opening !== undefined;
  }

  /** Resolves once opening has finished (successfully or not); never rejects. */
  async opened(): Promise<void> {
    await this.#opening?.catch(() => {});
  }

  /**
   * The fenced transition and COMMIT; on any error the transaction is abandoned. The carried
   * steps, if any, were written when the transaction opened: `params` carries none.
   */
  async commit(params: AdvanceParams): Promise<AdvanceResult> {
    const conn = this.#conn;
    if (this.#state !== 'open' || conn === undefined)
      throw new Error(`internal: commit of a ${this.#state} step transaction`);
    this.#state = 'committing';
    try {
      const { carry: _written, ...withoutCarry } = params;
      // The commit fails when it is not fenced (UNFENCED_STEP_COMMIT): the transaction is then
      // aborted, and COMMIT, sent right behind it, rolls it back.
      const [advanced, ended] = await this.#send(conn, [advanceRunStatement(withoutCarry), sql`COMMIT`]);
      if (advanced!.status === 'rejected') {
        if (!isUnfencedStepCommit(advanced!.reason)) throw advanced!.reason;
        this.#state = 'closed';
        this.#finish();
        return advanceResultOf(withoutCarry, undefined);
      }
      if (ended!.status === 'rejected') throw ended!.reason;
      const result = advanceResultOf(withoutCarry, advanced!.value.rows[0] as AdvanceRow | undefined);
      if (!result.fenced) throw new Error('internal: a transactional step commit answered unfenced instead of failing');
      this.#committed = true;
      this.#state = 'closed';
      this.#finish();
      if (this.#carried !== undefined) this.#carried.written = true;
      return result;
    } catch (error) {
      this.#state = 'open';
      await this.abandon();
      throw error;
    }
  }

  /**
   * Ends the transaction without committing anything. Idempotent; resolves once the connection
   * has been rolled back and given back (at once while no connection is held yet: opening gives
   * it back when it comes). A commit under way is left to finish or fail on its own.
   */
  abandon(): Promise<void> {
    const state = this.#state;
    if (state === 'idle') this.#state = 'closed';
    if (state !== 'opening' && state !== 'open') return this.#ending ?? Promise.resolve();
    this.#state = 'closed';
    this.#ending = this.#end(state);
    return this.#ending;
  }

  async #end(was: 'opening' | 'open'): Promise<void> {
    if (this.#conn === undefined) return; // still waiting for a connection: #open gives it back
    if (was === 'opening') {
      // Opening sends nothing more once it sees 'closed'; its statement in flight (a ledger
      // INSERT waiting on another transaction's row, at most lock_timeout) ends first.
      await this.#opening?.catch(() => {});
    } else if (this.#statementsInFlight > 0 && this.#pid !== undefined && this.s.terminateBackend !== undefined) {
      // A handler statement is stuck (e.g. waiting on a lock): ROLLBACK would queue behind it.
      await this.s.terminateBackend(this.#pid).catch(() => {});
    }
    await this.#rollback();
  }

  async #rollback(): Promise<void> {
    const conn = this.#conn;
    if (conn === undefined) return;
    await sql`ROLLBACK`.execute(conn).catch(() => {});
    this.#finish();
  }

  /** Tells a start whose insert this transaction took how the transaction ended (once). */
  #startEnded(): void {
    if (!this.#insertsStart) return;
    this.#insertsStart = false;
    this.s.run.pendingStart?.transactionEnded(this.#committed);
  }

  #finish(): void {
    this.#startEnded();
    this.#release?.();
    this.#release = undefined;
    this.#conn = undefined;
  }

  async #execute<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    if (this.#state === 'idle') {
      this.#state = 'opening';
      this.#opening = this.#open();
    }
    await this.#opening;
    const conn = this.#conn;
    if (this.#state !== 'open' || conn === undefined) {
      throw new Error(
        `ctx.tx of step "${this.s.step.name}" (run ${this.s.run.id}) is closed: the step's transaction ended ` +
          '(its lease was lost, its time ran out, or the handler already returned); nothing more can be written through it.',
      );
    }
    this.#statementsInFlight += 1;
    try {
      return await conn.executeQuery<R>(compiled as CompiledQuery<R>);
    } finally {
      this.#statementsInFlight -= 1;
    }
  }

  async #open(): Promise<void> {
    // A run its start handed over uninserted: its insert rides on this transaction, first in it
    // (deferred-start.ts) — taken before the connection, so that no insert alone is waited for holding one.
    const pending = this.s.run.pendingStart;
    if (pending !== undefined && !pending.inserted) this.#insertsStart = await pending.takeForTransaction();
    let held: { conn: Kysely<LedgerflowDatabase>; release: () => void };
    try {
      held = await holdConnection(this.s.db);
    } catch (error) {
      this.#startEnded();
      throw error;
    }
    if (this.#state !== 'opening') {
      held.release();
      this.#startEnded();
      throw this.#endedWhileOpening();
    }
    this.#conn = held.conn;
    this.#release = held.release;
    this.#statementsInFlight += 1;
    try {
      const carry = this.s.carry !== undefined && !this.s.carry.written ? this.s.carry : undefined;
      const opened = await this.#sendOpening(held.conn, this.#insertsStart ? pending : undefined, carry);
      this.#pid = opened.pid;
      if (carry !== undefined) {
        if (!opened.fenced) throw leaseLost(this.s.lease, 'the transactional step (with the steps carried before it)');
        // The deadline passed while the carried steps ran: no effect starts after it is seen.
        if (opened.overdue) throw new CarriedPastDeadline(this.s.run.id, this.s.step.name);
        this.#carried = carry;
      }
      if (!opened.fenced) throw leaseLost(this.s.lease, 'the transactional step');
      if (!opened.inserted) {
        this.effectExists = true;
        throw new Error(
          `Step "${this.s.step.name}" of run ${this.s.run.id} already has a ledger row; its recorded output is reused.`,
        );
      }
      if (this.#state !== 'opening') throw this.#endedWhileOpening();
      this.#state = 'open';
    } catch (error) {
      if (this.#state === 'opening') {
        // Opening failed on its own: it ends the transaction. (When abandon() closed it, abandon
        // rolls back once this has returned, and its reason, not this error, is the step's.)
        this.openError ??= error;
        this.#state = 'closed';
        this.#ending = this.#rollback();
        await this.#ending;
      }
      throw error;
    } finally {
      this.#statementsInFlight -= 1;
    }
  }

  /**
   * BEGIN (with the transaction's timeouts), the start's insert when this transaction carries it,
   * and the statement that opens the step's ledger row (writing the carried steps first, when
   * there are any). On a pipelining store they go out together, answered in order: one round trip
   * instead of three. Nothing they write can commit before the step's own COMMIT, so sending the
   * insert and the ledger row before BEGIN's answer is back changes nothing of what commits.
   */
  async #sendOpening(
    conn: Kysely<LedgerflowDatabase>,
    start: PendingStart | undefined,
    carry: Carry | undefined,
  ): Promise<OpenedTransactionalEffect> {
    const leaseMs = Math.ceil(this.s.lease.leaseMs);
    const idleMs = Math.ceil(this.s.step.timeoutMs + this.s.lease.leaseMs);
    const begin = sql.raw(
      `BEGIN; SET LOCAL lock_timeout = '${leaseMs}ms'; SET LOCAL idle_in_transaction_session_timeout = '${idleMs}ms'`,
    );
    const flush: FlushParams | undefined =
      carry === undefined
        ? undefined
        : {
            lease: this.s.lease,
            workflowName: this.s.run.workflowName,
            workflowVersion: this.s.run.workflowVersion,
            carry,
            step: this.s.step,
            attempt: this.s.attempt,
          };
    const opening = () => openingStatement(this.s.lease, this.s.step, this.claim, flush);
    if (this.s.pipelines !== true) {
      await begin.execute(conn);
      await faultPoint('opening-step-transaction');
      if (this.#state !== 'opening') throw this.#endedWhileOpening();
      if (start !== undefined) {
        await (await start.insertWithin()).execute(conn);
        if (this.#state !== 'opening') throw this.#endedWhileOpening();
      }
      return toOpenedTransactionalEffect((await opening().execute(conn)).rows[0]!);
    }
    await faultPoint('opening-step-transaction');
    const insert = start === undefined ? undefined : await start.insertWithin();
    if (this.#state !== 'opening') throw this.#endedWhileOpening();
    const answers = await this.#send(conn, [begin, ...(insert === undefined ? [] : [insert]), opening()]);
    // The first failure in order is the cause; the ones after it only saw an aborted transaction.
    for (const answer of answers) if (answer.status === 'rejected') throw answer.reason;
    const last = answers.at(-1) as PromiseFulfilledResult<QueryResult<OpeningRow>>;
    return toOpenedTransactionalEffect(last.value.rows[0]!);
  }

  /**
   * Sends `statements` on the transaction's connection and settles each: together (pipelined)
   * on a pipelining store, otherwise one after the other — every one sent even after one failed,
   * as the pipeline sends them (in an aborted transaction each later statement fails, and COMMIT
   * rolls back).
   */
  async #send(
    conn: Kysely<LedgerflowDatabase>,
    statements: readonly RawBuilder<unknown>[],
  ): Promise<PromiseSettledResult<QueryResult<unknown>>[]> {
    const compiled = statements.map((s) => s.compile(conn));
    if (this.s.pipelines === true) {
      return conn
        .getExecutor()
        .provideConnection((connection) => Promise.allSettled(compiled.map((c) => connection.executeQuery(c))));
    }
    const answers: PromiseSettledResult<QueryResult<unknown>>[] = [];
    for (const c of compiled) {
      answers.push(
        await conn.executeQuery(c).then(
          (value) => ({ status: 'fulfilled', value }) as const,
          (reason: unknown) => ({ status: 'rejected', reason }) as const,
        ),
      );
    }
    return answers;
  }

  #endedWhileOpening(): Error {
    return leaseLost(this.s.lease, 'the transactional step (ended before its transaction opened)');
  }
}

/** Takes one connection from the store and keeps it until `release()` is called. */
function holdConnection(
  db: Kysely<LedgerflowDatabase>,
): Promise<{ conn: Kysely<LedgerflowDatabase>; release: () => void }> {
  return new Promise((resolve, reject) => {
    let release!: () => void;
    const released = new Promise<void>((done) => (release = done));
    db.connection()
      .execute(async (conn) => {
        resolve({ conn, release });
        await released;
      })
      .catch(reject);
  });
}
