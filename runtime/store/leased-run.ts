import type { Kysely, RawBuilder } from 'kysely';
import type { Json, LedgerflowDatabase } from './tables.js';

/*
 * A run as its holder gets it: the row the claim statement returns (worker/claim.ts) and what the
 * worker drives. Here, below the client and the worker, because a start for the worker of its own
 * process inserts its run already claimed and returns the same row (client/insert-run.ts,
 * `insertRunStatement` with `claimedBy`), which that worker then drives like any claimed run.
 */

/**
 * The error name of an attempt closed because its lease expired: what the crash limit counts
 * ({@link LeasedRun.crashes}); the claim writes it when it takes a run over.
 */
export const LEASE_EXPIRED = 'LeaseExpired';

/** A run a worker holds under a lease, positioned at its current step. */
export interface LeasedRun {
  readonly id: string;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly input: Json;
  readonly currentStep: number;
  readonly fencingToken: number;
  /**
   * The `running` attempt of the current step; `null` when the claim opened none: the workflow
   * has no step left, or {@link LeasedRun.repeatedCrash} is set.
   */
  readonly attempt: number | null;
  /** Failed attempts of the current step so far (what `maxAttempts` counts). */
  readonly priorFailures: number;
  /**
   * Attempts of the current step abandoned because their lease expired while they ran — the
   * worker died, hung or lost the database (`LeaseExpired`) — including one this claim closed.
   */
  readonly crashes: number;
  /**
   * This claim took the run over from a crashed attempt, and the step had crashed before: no
   * attempt was opened; the worker backs off or, at the crash limit, gives up (`commitCrash`).
   */
  readonly repeatedCrash: boolean;
  /** Checkpointed outputs of the steps before the current one (skipped steps have none). */
  readonly outputs: Readonly<Record<string, Json>>;
  /** The run's deadline has passed (database time): it is to be cancelled, not advanced. */
  readonly overdue: boolean;
  /** This claim closed an attempt whose worker stopped renewing its lease (it crashed, as far as anyone can tell). */
  readonly tookOver: boolean;
  /** The trace context stored when the run was started (`workflow_run.trace_context`); its spans continue it. */
  readonly traceContext: Json | null;
  /** Set on a run a start of this process has not inserted yet: its insert rides on the run's first commit. */
  readonly pendingStart?: PendingStart;
  /**
   * The queue slots the claim took for the current step's attempt {@link LeasedRun.attempt} ('' the
   * run's own, else the step's name), on the fast path (worker/claim.ts): not asked for again.
   */
  readonly slotsTaken?: {
    readonly position: number;
    readonly attempt: number | null;
    readonly slots: readonly string[];
  };
}

/** The row the claim statement returns per run (also the shape of a fused claim's JSON array). */
export interface LeasedRunRow {
  id: string;
  workflow_name: string;
  workflow_version: number;
  input: Json;
  current_step: number;
  fencing_token: number;
  attempt: number | null;
  prior_failures: number;
  crashes: number;
  repeated_crash: boolean;
  outputs: Record<string, Json> | null;
  overdue: boolean;
  took_over: boolean;
  trace_context: Json | null;
  /** Only from a claim whose registry has a queue it takes slots of (worker/claim.ts); NULL: none taken. */
  slots_taken?: string[] | null;
}

export function toLeasedRun(row: LeasedRunRow): LeasedRun {
  return {
    id: row.id,
    workflowName: row.workflow_name,
    workflowVersion: row.workflow_version,
    input: row.input,
    currentStep: row.current_step,
    fencingToken: row.fencing_token,
    attempt: row.attempt,
    priorFailures: row.prior_failures,
    crashes: row.crashes,
    repeatedCrash: row.repeated_crash,
    outputs: row.outputs ?? {},
    overdue: row.overdue === true,
    tookOver: row.took_over === true,
    traceContext: row.trace_context ?? null,
    ...(row.slots_taken
      ? { slotsTaken: { position: row.current_step, attempt: row.attempt, slots: row.slots_taken } }
      : {}),
  };
}

/**
 * A run a `startAndWait` of this process handed to its worker BEFORE inserting it: its insert
 * rides on the run's first commit (DESIGN.md "The start rides on the run's first commit";
 * client/start-run.ts makes it, the worker drives the run it is attached to). Until
 * {@link PendingStart.inserted}, the run has no row: nothing but its flight knows it.
 *
 *   pending ──takeForTransaction()──▶ in a transaction ──transactionEnded(true)──▶ inserted
 *                                  in a transaction ──transactionEnded(false)──▶ pending
 *   pending ──insertAlone(db) committed──▶ inserted      (failed: pending)
 *   pending ──insertCompleted(db, …) committed──▶ inserted (completed; failed: pending)
 *   pending ──flightEnded()──▶ given up (the start inserts it itself, unclaimed)
 *
 * One insert at a time: `insertAlone` waits for a transaction that carries the insert to end, and
 * a transaction takes the insert before it takes a connection (no one waits holding one).
 * Every insert is `ON CONFLICT DO NOTHING` under a random run id only this start knows, so an
 * insert that finds the row finds this run's own (one whose earlier insert's outcome was unknown).
 */
export interface PendingStart {
  /** The run's insert is known committed. */
  readonly inserted: boolean;
  /** A transaction that carries the insert is open (nobody else can see the run; its commit renews the lease). */
  readonly inTransaction: boolean;
  /** Makes sure the row exists, as its own commit: what every commit but a transactional step's does first. */
  insertAlone(db: Kysely<LedgerflowDatabase>): Promise<void>;
  /**
   * Takes the insert for a transaction about to open — before it takes a connection, so that
   * nobody waits on an insert alone while holding one — `false` when the row exists already.
   * After `true`: `insertWithin` for that transaction to send, and `transactionEnded` however it ends.
   */
  takeForTransaction(): Promise<boolean>;
  /**
   * The run's first commit is its completion (plain steps only): ONE statement inserts the run
   * already completed, with its attempts and results — one round trip, one durable commit for the
   * whole workflow. `inserted-before`: the row exists (an insert alone made it): the caller
   * commits as for any inserted run. `not-written`: the statement found the row — an earlier
   * insert of this run whose outcome was unknown — and wrote nothing.
   */
  insertCompleted(
    db: Kysely<LedgerflowDatabase>,
    completion: StartCompletion,
  ): Promise<'completed' | 'inserted-before' | 'not-written'>;
  /** The insert taken by `takeForTransaction`, for that transaction to send (possibly pipelined with its next statements). */
  insertWithin(): Promise<RawBuilder<{ id: string }>>;
  /** That transaction committed (`true`) or was rolled back or its outcome is unknown (`false`). */
  transactionEnded(committed: boolean): void;
  /** The flight driving the run is over: a run not inserted by then is given back to its start. */
  flightEnded(): void;
}

/**
 * What a {@link PendingStart.insertCompleted} writes besides the start's own columns: the step
 * that completes the run and the plain steps carried before it (worker/carried-prefix.ts), every
 * value ready to send. Times are worker measures in milliseconds before the statement.
 */
export interface StartCompletion {
  readonly stepName: string;
  readonly stepKind: string;
  readonly attempt: number;
  /** The step's output, JSON text. */
  readonly output: string;
  /** The run's output (every step's, stored form), JSON text. */
  readonly runOutput: string;
  /** The run's position after its last step. */
  readonly toPosition: number;
  /**
   * The carried steps' rows as the carry's writes send them (`CarriedRow[]` as JSON) and how long
   * before the statement the completing step's attempt started; without a carry the attempt is
   * dated from the hand-over, as a claimed insert dates it.
   */
  readonly carried?: { readonly rows: string; readonly stepStartAgo: number };
}
