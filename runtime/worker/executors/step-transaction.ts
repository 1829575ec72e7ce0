import { sql, type CompiledQuery, type Kysely, type QueryResult } from 'kysely';
import type { LedgerflowDatabase } from '../../store/tables.js';
import { openTransactionalEffect, type EffectClaim } from '../ledger.js';
import { advanceRun, leaseLost, type AdvanceParams, type AdvanceResult } from '../step-commits.js';
import type { StepExecution } from './step-execution.js';
import { statementHandle } from './statement-dialect.js';

/**
 * The transaction of one `transactional` step attempt, opened lazily.
 *
 * States:
 *   idle     --first statement through ctx.tx-->  opening   (a connection is taken from the store)
 *   opening  --BEGIN + timeouts, ledger row inserted, fence ok-->  open
 *   opening  --the step already has a ledger row, or the fence failed-->  failed (rolled back)
 *   open     --commit(): fenced transition, COMMIT-->  closed
 *   any      --abandon(): lease lost, time up, handler threw-->  closed (rolled back; a stuck
 *                statement's session terminated on PostgreSQL)
 * A statement sent through ctx.tx once the transaction is closed (a zombie handler that kept
 * going) is refused; it can never run outside the step's transaction.
 *
 * The connection is held only from the first statement to the end, so a handler that sends
 * nothing through `ctx.tx` pins none — on PGlite, whose single connection heartbeats, claims
 * and `client.start` share, that matters. Inside the transaction, `lock_timeout` (one lease)
 * bounds how long it waits on another session's locks, and `idle_in_transaction_session_timeout`
 * (the step's time limit plus one lease) lets the server end a session whose worker froze.
 */
export class StepTransaction {
  /** ctx.tx: a Kysely instance whose every statement goes through {@link StepTransaction.#execute}. */
  readonly handle: Kysely<unknown>;
  /** The step already had a ledger row: nothing of this transaction may commit. */
  effectExists = false;
  /** Why opening failed (a lost fence, a database error), to report instead of what the handler made of it. */
  openError: unknown;

  #state: 'idle' | 'opening' | 'open' | 'closed' = 'idle';
  #opening: Promise<void> | undefined;
  #conn: Kysely<LedgerflowDatabase> | undefined;
  #release: (() => void) | undefined;
  #pid: number | undefined;
  #statementsInFlight = 0;

  constructor(
    private readonly s: StepExecution,
    private readonly claim: EffectClaim,
  ) {
    this.handle = statementHandle((compiled) => this.#execute(compiled), { name: `ctx.tx of step "${s.step.name}"`, transactions: 'owner' });
  }

  /** Whether the handler sent anything, i.e. whether a transaction was (or is being) opened. */
  get began(): boolean {
    return this.#state !== 'idle';
  }

  /** Resolves once opening has finished (successfully or not); never rejects. */
  async opened(): Promise<void> {
    await this.#opening?.catch(() => {});
  }

  /** The fenced transition and COMMIT; on any error the transaction is abandoned. */
  async commit(params: AdvanceParams): Promise<AdvanceResult> {
    const conn = this.#conn;
    if (this.#state !== 'open' || conn === undefined) throw new Error(`internal: commit of a ${this.#state} step transaction`);
    this.#state = 'closed';
    try {
      const result = await advanceRun(conn, params);
      await sql`${sql.raw(result.fenced ? 'COMMIT' : 'ROLLBACK')}`.execute(conn);
      this.#finish();
      return result;
    } catch (error) {
      this.#state = 'open';
      await this.abandon();
      throw error;
    }
  }

  /** Ends the transaction without committing anything, at once. Idempotent. */
  async abandon(): Promise<void> {
    const wasOpen = this.#state === 'opening' || this.#state === 'open';
    this.#state = 'closed';
    if (!wasOpen) return;
    const conn = this.#conn;
    if (conn === undefined) {
      // Still waiting for a connection: once it comes, #open sees the state and gives it back.
      return;
    }
    if (this.#statementsInFlight > 0 && this.#pid !== undefined && this.s.terminateBackend !== undefined) {
      // A statement is stuck (e.g. waiting on a lock): ROLLBACK would queue behind it.
      await this.s.terminateBackend(this.#pid).catch(() => {});
    }
    await sql`ROLLBACK`.execute(conn).catch(() => {});
    this.#finish();
  }

  #finish(): void {
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
    try {
      const held = await holdConnection(this.s.db);
      if (this.#state === 'closed') {
        held.release();
        throw leaseLost(this.s.lease, 'the transactional step (ended before its transaction opened)');
      }
      this.#conn = held.conn;
      this.#release = held.release;
      const leaseMs = Math.ceil(this.s.lease.leaseMs);
      const idleMs = Math.ceil(this.s.step.timeoutMs + this.s.lease.leaseMs);
      this.#statementsInFlight += 1;
      try {
        await sql
          .raw(`BEGIN; SET LOCAL lock_timeout = '${leaseMs}ms'; SET LOCAL idle_in_transaction_session_timeout = '${idleMs}ms'`)
          .execute(held.conn);
        const opened = await openTransactionalEffect(held.conn, this.s.lease, this.s.step, this.claim);
        this.#pid = opened.pid;
        if (!opened.fenced) throw leaseLost(this.s.lease, 'the transactional step');
        if (!opened.inserted) {
          this.effectExists = true;
          throw new Error(`Step "${this.s.step.name}" of run ${this.s.run.id} already has a ledger row; its recorded output is reused.`);
        }
      } finally {
        this.#statementsInFlight -= 1;
      }
      if (this.#state === 'opening') this.#state = 'open';
    } catch (error) {
      this.openError ??= error;
      await this.abandon();
      throw error;
    }
  }
}

/** Takes one connection from the store and keeps it until `release()` is called. */
function holdConnection(db: Kysely<LedgerflowDatabase>): Promise<{ conn: Kysely<LedgerflowDatabase>; release: () => void }> {
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
