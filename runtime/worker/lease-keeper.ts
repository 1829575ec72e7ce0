/**
 * Keeps the leases of the worker's flights: every `heartbeatMs` it renews all of them in one
 * statement (`renewLeases`, by run id AND fencing token), and it aborts the handlers of the
 * flights it can no longer vouch for.
 *
 * Keeper: stopped ──start()──▶ beating ──stop()──▶ stopped. While beating, each tick first
 * runs the local watchdog, then a renewal unless one is still in flight (one at a time; a slow
 * database skips ticks rather than piling statements up).
 *
 * A flight, as the keeper sees it:
 *
 *   held ──renewal confirmed──▶ held (renewedAt = when that renewal was sent)
 *   held ──renewal says lost (token moved on, run left `running`)──▶ aborted, `lease-lost`
 *   held ──no confirmed renewal for a whole lease (database unreachable, this timer stalled)──▶
 *        aborted by the watchdog, so that nothing — in particular no `perform` — starts under
 *        a lease that may have expired (the keeper emits nothing here; the run's driver ends
 *        the drive as it does on any lost lease)
 *
 * A run whose row is locked by its own step commit is skipped by the renewal, not reported
 * lost: that commit extends the lease itself. Renewal errors are reported (`error`, where
 * 'heartbeat') and the next tick tries again.
 */

import type { Kysely } from 'kysely';
import { LeaseLostError } from '../errors.js';
import { faultPoint } from '../faults/fault-points.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { flightKey, type Flight } from './flight.js';
import { renewLeases } from './lease.js';
import { serializeError } from './step-errors.js';
import type { WorkerEvent } from './worker-events.js';

export interface LeaseKeeperContext {
  readonly db: Kysely<LedgerflowDatabase>;
  readonly leaseMs: number;
  readonly heartbeatMs: number;
  readonly flights: ReadonlyMap<string, Flight>;
  emit(event: WorkerEvent): void;
}

export class LeaseKeeper {
  readonly #ctx: LeaseKeeperContext;
  #timer: NodeJS.Timeout | undefined;
  #renewing = false;

  constructor(ctx: LeaseKeeperContext) {
    this.#ctx = ctx;
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.#beat(), this.#ctx.heartbeatMs);
  }

  /** No tick after this; a renewal in flight still completes. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #beat(): Promise<void> {
    const { db, leaseMs, flights, emit } = this.#ctx;
    const now = performance.now();
    for (const flight of flights.values()) {
      if (now - flight.renewedAt > leaseMs && !flight.abort.aborted) {
        flight.abort.abort(new LeaseLostError(`lease on run ${flight.runId} not renewed within ${leaseMs} ms`));
      }
    }
    if (this.#renewing || flights.size === 0) return;
    this.#renewing = true;
    try {
      await faultPoint('before-lease-renewal');
      const sentAt = performance.now();
      const held = this.#insertPendingStarts(
        [...flights.values()].filter((f) => !f.abort.aborted),
        sentAt,
      );
      const { lost } = held.length === 0 ? { lost: [] } : await renewLeases(db, held, leaseMs);
      const lostFlights = new Set(lost.map((l) => flightKey(l.runId, l.fencingToken)));
      for (const flight of held) {
        if (lostFlights.has(flightKey(flight.runId, flight.fencingToken))) {
          flight.abort.abort(
            new LeaseLostError(`lease on run ${flight.runId} (token ${flight.fencingToken}) was taken over`),
          );
          emit({ type: 'lease-lost', runId: flight.runId, fencingToken: flight.fencingToken, step: null });
        } else {
          flight.renewedAt = sentAt;
        }
      }
    } catch (error) {
      emit({ type: 'error', where: 'heartbeat', error: serializeError(error) });
    } finally {
      this.#renewing = false;
    }
  }

  /**
   * The flights whose leases the renewal renews. A run a start of this process handed over
   * uninserted (`PendingStart`) has no row to renew: one whose insert rides in an open
   * transaction is invisible to everyone else and that transaction's commit sets its lease, so
   * it counts as renewed; any other is inserted now, alone — not awaited by this renewal, which
   * must not wait for a transaction that may have begun meanwhile — so that a run is in the
   * database within about one heartbeat of its start however long its first steps take. One whose
   * insert fails is not counted renewed: its start inserts it once its flight ends.
   */
  #insertPendingStarts(flights: readonly Flight[], sentAt: number): Flight[] {
    const renewed: Flight[] = [];
    for (const flight of flights) {
      const pending = flight.pendingStart;
      if (pending === undefined || pending.inserted) renewed.push(flight);
      else if (pending.inTransaction) flight.renewedAt = sentAt;
      else {
        pending.insertAlone(this.#ctx.db).then(
          () => {
            flight.renewedAt = Math.max(flight.renewedAt, sentAt);
          },
          (error: unknown) => this.#ctx.emit({ type: 'error', where: 'heartbeat', error: serializeError(error) }),
        );
      }
    }
    return renewed;
  }
}
