/**
 * The worker's LISTEN on {@link RUNS_CHANNEL}: a wake-up hint for the claim loop, nothing more.
 * `start()` NOTIFYs once per new run; a notification makes an idle worker claim at once instead
 * of at its next poll. Everything a notification announces the poll finds too, so a lost
 * subscription costs latency, never a run — which is why recovering it is best effort: report,
 * back off, subscribe again.
 *
 * States (one subscription at a time):
 *
 *   none ──subscribe()──▶ subscribing ──ok──▶ up
 *   subscribing ──refused──▶ down       emits `error` (where 'listen'); retries after a backoff
 *   up ──connection lost──▶ down        emits `listener-lost`; retries after a backoff
 *   down ──retry timer──▶ subscribing ──ok──▶ up
 *                                       emits `listener-restored` and hints: claim now, for the
 *                                       runs started while nobody listened
 *   up ──markStale(), then subscribe()──▶ subscribing   (replaces the subscription; see below)
 *   any ──close()──▶ none               (the worker is stopping)
 *   (a store that cannot listen, `listenUnavailable`: stays none; the claim loop polls)
 *
 * Backoff: 100 ms after a loss, doubling with every refused attempt, at most 5 s.
 *
 * Stale: a failed claim means the database was unreachable, and a subscription's connection may
 * then be dead without having said so (half-open). The claim loop marks the subscription stale
 * and, after its next successful claim, subscribes again (replacing it) once it has launched the
 * runs that claim took (they hold their slots, and their leases are renewed, meanwhile).
 *
 * A loss is reported by the subscription it belongs to: a report from a subscription already
 * replaced or closed is ignored, and one that arrives before `store.listen` even returned is
 * honoured (the fresh subscription is closed at once and the retry timer stands). While the
 * worker is not starting or running, nothing is reported and nothing is retried.
 */

import { RUNS_CHANNEL } from '../store/channels.js';
import type { Store } from '../store/store.js';
import { exponentialBackoffMs } from '../backoff.js';
import { serializeError } from './step-errors.js';
import type { WorkerEvent } from './worker-events.js';

const RELISTEN_BACKOFF = { firstMs: 100, maxMs: 5_000 } as const;

export interface RunsSubscriptionContext {
  readonly store: Pick<Store, 'listen' | 'listenUnavailable'>;
  /** Whether the worker wants a subscription at all: it is starting or running. */
  isWanted(): boolean;
  /** A notification arrived, or the subscription is back after an outage: claim now. */
  hint(): void;
  emit(event: WorkerEvent): void;
}

/** One LISTEN call's subscription. */
interface Listening {
  unlisten: (() => Promise<void>) | undefined;
  /** Its connection broke (possibly reported before `store.listen` returned). */
  lost: boolean;
}

export class RunsSubscription {
  readonly #ctx: RunsSubscriptionContext;
  /** The subscription whose loss counts; `undefined` while there is none. */
  #current: Listening | undefined;
  /** The subscribe in progress; calls made meanwhile share it. */
  #subscribing: Promise<void> | undefined;
  /** Set by a loss or a refused attempt, cleared by the next success (`listener-restored`). */
  #outage: { failedAttempts: number } | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #stale = false;

  constructor(ctx: RunsSubscriptionContext) {
    this.#ctx = ctx;
  }

  /** A claim failed since the last subscribe: the subscription may be dead without knowing it. */
  get stale(): boolean {
    return this.#stale;
  }

  markStale(): void {
    this.#stale = true;
  }

  /**
   * Subscribes, replacing any earlier subscription. Never rejects: failures are retried. A store
   * that cannot listen (`listenUnavailable`: behind a transaction pooler with no URL to listen on)
   * is not asked: the claim loop's poll finds every run a notification would have announced.
   */
  subscribe(): Promise<void> {
    if (this.#ctx.store.listenUnavailable !== undefined) return Promise.resolve();
    this.#subscribing ??= this.#replace().finally(() => (this.#subscribing = undefined));
    return this.#subscribing;
  }

  /** Cancels a pending retry, waits for a subscribe in progress and unsubscribes. */
  async close(): Promise<void> {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    await this.#subscribing;
    const current = this.#current;
    this.#current = undefined;
    await current?.unlisten?.().catch(() => {});
  }

  async #replace(): Promise<void> {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#stale = false;
    const previous = this.#current;
    const listening: Listening = { unlisten: undefined, lost: false };
    this.#current = listening;
    await previous?.unlisten?.().catch(() => {});
    try {
      listening.unlisten = await this.#ctx.store.listen(
        RUNS_CHANNEL,
        () => this.#ctx.hint(),
        (error) => this.#lost(listening, error),
      );
    } catch (error) {
      this.#current = undefined;
      this.#outage = { failedAttempts: (this.#outage?.failedAttempts ?? 0) + 1 };
      this.#ctx.emit({ type: 'error', where: 'listen', error: serializeError(error) });
      this.#retryLater();
      return;
    }
    if (listening.lost || !this.#ctx.isWanted()) {
      if (this.#current === listening) this.#current = undefined;
      await listening.unlisten().catch(() => {});
      return;
    }
    if (this.#outage !== undefined) {
      this.#ctx.emit({ type: 'listener-restored', failedAttempts: this.#outage.failedAttempts });
      this.#ctx.hint();
    }
    this.#outage = undefined;
  }

  #lost(listening: Listening, error: Error): void {
    if (listening !== this.#current || !this.#ctx.isWanted()) return;
    listening.lost = true;
    this.#current = undefined;
    this.#outage ??= { failedAttempts: 0 };
    this.#ctx.emit({ type: 'listener-lost', error: serializeError(error) });
    this.#retryLater();
  }

  #retryLater(): void {
    if (this.#retryTimer !== undefined || !this.#ctx.isWanted()) return;
    const delayMs = exponentialBackoffMs((this.#outage?.failedAttempts ?? 0) + 1, RELISTEN_BACKOFF);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      void this.subscribe();
    }, delayMs);
  }
}
