import type { PendingStart } from '../store/leased-run.js';

// A flight: one claimed run being driven by this worker under one lease. The worker owns the
// map of flights (keyed by `flightKey`); the claim loop reads how many there are and which
// leases they hold, the lease keeper renews them and aborts the ones it cannot renew.
//
// A flight's life: launched (claim, fused claim, local start or adoption — in the same turn as
// the claim's answer, so that it holds its slot and its lease is renewed from the claim on) →
// driving → done (removed from the map). A lease is launched at most once: the claim loop skips
// a run whose (id, token) already has a flight. Its `abort` fires when its lease is lost, not
// renewed in time, or the worker gives up waiting for it on stop; `refilled` is set once its
// completion commit claimed the next runs itself (a fused claim), so that its end need not wake
// the claim loop.

export interface Flight {
  readonly runId: string;
  readonly fencingToken: number;
  readonly abort: FlightAbort;
  /** Local monotonic time of the last confirmed renewal: a duration, never compared to the database. */
  renewedAt: number;
  done: Promise<void>;
  /** Its completion commit claimed for the slot it frees (fused), so the claim loop need not. */
  refilled: boolean;
  /** A run a start of this process handed over uninserted: the lease keeper inserts it if no commit has yet. */
  readonly pendingStart?: PendingStart;
}

/** A flight is one lease: a run id AND its fencing token (a stale flight of the run may still be around). */
export function flightKey(runId: string, fencingToken: number): string {
  return `${runId}:${fencingToken}`;
}

/** What the worker reads of an abort: a subset of AbortSignal's, so that a real one passes too. */
export interface AbortLike {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { readonly once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * A flight's abort, and every step's view of it. Not an AbortController: on Node 20 making one
 * and adding and removing a listener costs about 11 µs, a tenth of a one-step workflow's worker
 * CPU, for a signal that almost never fires and that handlers rarely read. This one is a flag
 * and a set of listeners (0.3 µs); the AbortSignal a handler reads (`ctx.signal`, through
 * {@link FlightAbort.signal}) is made on first use and aborts with it. Listeners run once, in
 * the call to {@link FlightAbort.abort}, as an AbortSignal's do; one added after it does not run.
 */
export class FlightAbort implements AbortLike {
  #aborted = false;
  #reason: unknown = undefined;
  #listeners: Set<() => void> | undefined;
  #controller: AbortController | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  /** Aborts once (later calls change nothing), then runs the listeners; one that throws does not stop the others. */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
    const listeners = this.#listeners;
    this.#listeners = undefined;
    if (listeners === undefined) return;
    for (const listener of listeners) {
      try {
        listener();
      } catch (error) {
        // As an EventTarget reports a listener's error: uncaught, after the others ran.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  addEventListener(_type: 'abort', listener: () => void, _options?: { readonly once?: boolean }): void {
    if (!this.#aborted) (this.#listeners ??= new Set()).add(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    this.#listeners?.delete(listener);
  }

  /** An AbortSignal that aborts with this one (already aborted if this one is), made on first read. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }
}
