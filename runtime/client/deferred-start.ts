import type { Kysely, RawBuilder } from 'kysely';
import { faultPoint } from '../faults/fault-points.js';
import type { LeasedRun, PendingStart, StartCompletion } from '../store/leased-run.js';
import { toStoredJson } from '../store/stored-json.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';

/*
 * The start rides on the run's first commit (DESIGN.md). A `startAndWait` whose worker runs in
 * this process (`createClient({ store, worker })`) and has a slot free does not insert its run
 * first: it hands the run to that worker as a claimed run with no row yet — the same run the
 * claimed insert would have returned (attempt 1 of its first step, fencing token 1) — and the
 * insert is made by the run's first commit: inside a `transactional` step's transaction (one
 * commit for both), or alone, just before any other commit (step-transaction.ts, run-driver.ts).
 * Nothing is acknowledged before then: `startAndWait` returns only the run's result, and a
 * process that dies first takes the unacknowledged start with it, as it would take a start
 * whose insert never reached the database.
 *
 * Only for a run with a random id (no `runId`, no `dedupeKey`, not debounced): no other start
 * can name it, so an insert can never meet another run — an insert that finds the row has found
 * this run's own, from an earlier insert whose outcome was unknown.
 */

/**
 * The fencing token of a deferred start's run: its worker drives it under this token from the
 * hand-over, and its insert writes it. Not issued by `ledgerflow.next_fencing_token` (core 0023):
 * the run's id is random, so no token for it can exist on any timeline before the insert.
 */
export const DEFERRED_START_FENCING_TOKEN = 1;

/** What the wait of the start that made it needs: the insert's fate, and the insert to make itself if the worker gave it up. */
export interface DeferredInsert {
  /** `inserted` once the worker's insert committed; `given-up` when its flight ended before one did. */
  readonly outcome: Promise<'inserted' | 'given-up'>;
  /** The start's own insert of a run its worker gave up: unclaimed, as a start without a worker inserts it. */
  insertUnclaimed(): Promise<void>;
}

/**
 * One deferred start: the {@link PendingStart} the worker drives the run with, and the
 * {@link DeferredInsert} its wait reads. `claimedInsert(msAgo)`: the claimed insert, its run's
 * creation back-dated by `msAgo` (the time since the hand-over); `unclaimedInsert`: the fallback.
 */
export class DeferredStart implements PendingStart, DeferredInsert {
  readonly outcome: Promise<'inserted' | 'given-up'>;
  #resolve!: (outcome: 'inserted' | 'given-up') => void;
  #state: 'pending' | 'inserting' | 'in-transaction' | 'inserted' | 'given-up' = 'pending';
  /** Ends when the insert under way (alone or in a transaction) has ended, whatever became of it. */
  #busy: Promise<void> | undefined;
  #unbusy: (() => void) | undefined;
  readonly #handedOverAt = performance.now();

  constructor(
    /** The claimed insert, or with `completion` the completed one (insert-run.ts). */
    private readonly claimedInsert: (msAgo: number, completion?: StartCompletion) => RawBuilder<{ id: string }>,
    private readonly unclaimedInsert: () => Promise<void>,
  ) {
    this.outcome = new Promise((resolve) => (this.#resolve = resolve));
  }

  get inserted(): boolean {
    return this.#state === 'inserted';
  }

  get inTransaction(): boolean {
    return this.#state === 'in-transaction';
  }

  async insertAlone(db: Kysely<LedgerflowDatabase>): Promise<void> {
    while (this.#busy !== undefined) await this.#busy;
    // Given up: its start inserts it (a renewal that raced the flight's end has nothing to do).
    if (this.#state === 'inserted' || this.#state === 'given-up') return;
    this.#assertPending('insertAlone');
    this.#begin('inserting');
    let committed = false;
    try {
      await faultPoint('before-start-insert');
      await this.#statement().execute(db);
      committed = true;
    } finally {
      this.#end(committed);
    }
  }

  async insertCompleted(
    db: Kysely<LedgerflowDatabase>,
    completion: StartCompletion,
  ): Promise<'completed' | 'inserted-before' | 'not-written'> {
    if (!(await this.takeForTransaction())) return 'inserted-before';
    let committed = false;
    try {
      await faultPoint('before-start-insert');
      const { rows } = await this.#statement(completion).execute(db);
      committed = rows.length > 0;
    } finally {
      this.transactionEnded(committed);
    }
    return committed ? 'completed' : 'not-written';
  }

  async takeForTransaction(): Promise<boolean> {
    while (this.#busy !== undefined) await this.#busy;
    if (this.#state === 'inserted') return false;
    this.#assertPending('takeForTransaction');
    this.#begin('in-transaction');
    return true;
  }

  async insertWithin(): Promise<RawBuilder<{ id: string }>> {
    if (this.#state !== 'in-transaction') throw new Error(`internal: insertWithin of a ${this.#state} deferred start`);
    // Ended by transactionEnded, whatever this does.
    await faultPoint('before-start-insert');
    return this.#statement();
  }

  transactionEnded(committed: boolean): void {
    if (this.#state === 'in-transaction') this.#end(committed);
  }

  flightEnded(): void {
    if (this.#state === 'inserted' || this.#state === 'given-up') return;
    // The lease keeper's insert may still be on its way (the flight's own have returned): its answer decides.
    if (this.#busy !== undefined) {
      void this.#busy.then(() => this.flightEnded());
      return;
    }
    this.#state = 'given-up';
    this.#resolve('given-up');
  }

  insertUnclaimed(): Promise<void> {
    return this.unclaimedInsert();
  }

  /** The claimed insert, back-dated to the hand-over; an existing row (this run's own) inserts nothing. */
  #statement(completion?: StartCompletion): RawBuilder<{ id: string }> {
    return this.claimedInsert(Math.max(0, performance.now() - this.#handedOverAt), completion);
  }

  #assertPending(what: string): void {
    if (this.#state !== 'pending') throw new Error(`internal: ${what} of a ${this.#state} deferred start`);
  }

  #begin(state: 'inserting' | 'in-transaction'): void {
    this.#state = state;
    this.#busy = new Promise((resolve) => (this.#unbusy = resolve));
  }

  #end(committed: boolean): void {
    this.#state = committed ? 'inserted' : 'pending';
    const unbusy = this.#unbusy;
    this.#busy = undefined;
    this.#unbusy = undefined;
    unbusy?.();
    if (committed) this.#resolve('inserted');
  }
}

/** The run a deferred start hands its worker: what the claimed insert would return for it. */
export function deferredRun(
  pending: DeferredStart,
  run: {
    readonly id: string;
    readonly workflowName: string;
    readonly workflowVersion: number;
    readonly inputJson: string;
    readonly traceContext: Json | null;
  },
): LeasedRun {
  return {
    id: run.id,
    workflowName: run.workflowName,
    workflowVersion: run.workflowVersion,
    // As a claim reads it back from jsonb (key order included): a key or request hash computed now equals one after a reload.
    input: toStoredJson(JSON.parse(run.inputJson)) ?? null,
    currentStep: 0,
    fencingToken: DEFERRED_START_FENCING_TOKEN,
    attempt: 1,
    priorFailures: 0,
    crashes: 0,
    repeatedCrash: false,
    outputs: {},
    overdue: false,
    tookOver: false,
    traceContext: run.traceContext,
    pendingStart: pending,
  };
}
