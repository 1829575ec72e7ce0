// A flight: one claimed run being driven by this worker under one lease. The worker owns the
// map of flights (keyed by `flightKey`); the claim loop reads how many there are and which
// leases they hold, the lease keeper renews them and aborts the ones it cannot renew.
//
// A flight's life: launched (claim, fused claim, local start or adoption — in the same turn as
// the claim's answer, so that it holds its slot and its lease is renewed from the claim on) →
// driving → done (removed from the map). A lease is launched at most once: the claim loop skips
// a run whose (id, token) already has a flight. Its controller aborts when its lease is lost, not
// renewed in time, or the worker gives up waiting for it on stop; `refilled` is set once its
// completion commit claimed the next runs itself (a fused claim), so that its end need not wake
// the claim loop.

export interface Flight {
  readonly runId: string;
  readonly fencingToken: number;
  readonly controller: AbortController;
  /** Local monotonic time of the last confirmed renewal: a duration, never compared to the database. */
  renewedAt: number;
  done: Promise<void>;
  /** Its completion commit claimed for the slot it frees (fused), so the claim loop need not. */
  refilled: boolean;
}

/** A flight is one lease: a run id AND its fencing token (a stale flight of the run may still be around). */
export function flightKey(runId: string, fencingToken: number): string {
  return `${runId}:${fencingToken}`;
}
