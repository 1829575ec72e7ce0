import type { LeasedRun } from '../store/leased-run.js';
import type { Store } from '../store/store.js';
import type { LocalWaiters } from './local-waiters.js';

/*
 * What a client needs from the worker of its own process (`createClient({ store, worker })`):
 * a slot to insert a new run already claimed for that worker, and the worker's in-process answers
 * to waits. Defined here, by the client that uses it, and offered by the worker it is created
 * with (worker/worker.ts), so that the client never imports the worker.
 */

/**
 * A slot of the worker held for a run a start in this process creates (worker/claim-loop.ts,
 * "Start reservations"). Every reservation must be answered by exactly one `settle` call.
 */
export interface StartReservation {
  /** Whom the start's insert leases its new run to (`insertRunStatement`'s `claimedBy`). */
  readonly lease: { readonly workerId: string; readonly leaseMs: number };
  /**
   * The start's insert committed and took `runs` (none: its run id or dedupe key named an
   * existing or archived run); `undefined`: it failed, or its outcome is unknown.
   */
  settle(runs: readonly LeasedRun[] | undefined): void;
}

/**
 * How a client of the same process starts runs claimed for a worker
 * (`createClient({ worker })`; worker/claim-loop.ts, "Start reservations").
 */
export interface LocalStarts {
  /** The store the worker was created with: the client must use the same one. */
  readonly store: Store;
  /** A free slot for a run of `workflowName@version`, or `undefined` (see `ClaimLoop.reserveStart`). */
  reserve(workflowName: string, version: number): Promise<StartReservation | undefined>;
  /** The client's waits for runs this worker may settle, answered in-process (local-waiters.ts). */
  readonly waiters: LocalWaiters;
}

const localStarts = new WeakMap<object, LocalStarts>();

/** Called once by `createWorker` for the worker it makes: what {@link localStartsOf} answers for it. */
export function offerLocalStarts(worker: object, starts: LocalStarts): void {
  localStarts.set(worker, starts);
}

/** The {@link LocalStarts} of a worker made by `createWorker`; `undefined` for any other object. */
export function localStartsOf(worker: object): LocalStarts | undefined {
  return localStarts.get(worker);
}
