/**
 * The client's LISTEN on {@link RUN_SETTLED_CHANNEL}, shared by every `waitForRun` and
 * `startAndWait` of one client: a notification names the run that settled, and wakes the waits
 * of that run. A run notifies only if somebody marked it (`workflow_run.notify_settled`, core
 * 0011), so the channel carries the watched runs of every client of the database, and each
 * client keeps those it waits for.
 *
 * Why one channel with the run id as payload, not a channel per run: a channel per run would
 * cost a LISTEN and an UNLISTEN on the listening connection per wait (round trips a wait for a
 * 2 ms run cannot afford) and grow the server's listener table with every wait in progress;
 * one channel is one LISTEN per client for its lifetime, and a notification is dispatched by a
 * map lookup.
 *
 * A notification is a hint. Waits re-read the run's status after every wake-up and also poll:
 * slowly (`recheckMs`) while subscribed, in case a notification is lost unnoticed (a half-open
 * connection), and at `pollMs` while not subscribed. States:
 *
 *   none ──a wait begins──▶ subscribing ──ok──▶ up
 *   subscribing ──refused──▶ down        (retried after a backoff while anybody waits)
 *   up ──connection lost──▶ down         wakes every wait (it polls at `pollMs` now)
 *   down ──retry──▶ subscribing ──ok──▶ up   wakes every wait: what settled meanwhile was not announced
 *   up ──nobody waited for LINGER_MS──▶ none (UNLISTEN)
 *
 * A store that cannot listen (`listenUnavailable`: behind a transaction pooler with no URL to
 * listen on) stays in none, and every wait polls at `pollMs`.
 *
 * The subscription is kept between waits (a connection per wait would cost more than the wait)
 * and does not keep the process alive by itself (`keepProcessAlive: false`); a wait in progress
 * does, with its timer.
 */

import type { Kysely } from 'kysely';
import { RUN_SETTLED_CHANNEL } from '../store/channels.js';
import type { Store } from '../store/store.js';
import type { LedgerflowDatabase, RunStatus } from '../store/tables.js';
import { runStatusIn, SETTLED_RUN_STATUSES, type SettledRunStatus } from '../store/state-machines.js';
import { exponentialBackoffMs } from '../backoff.js';

/** How long the subscription stays after the last wait ended. */
const LINGER_MS = 10_000;
const RELISTEN_BACKOFF = { firstMs: 100, maxMs: 5_000 } as const;

/**
 * Marks a run as waited for, so that the transaction that settles it notifies (core 0011), and
 * returns its status as of the mark. No row when the run is settled already, was marked before,
 * or does not exist: the caller reads the status then. One UPDATE: a settle committed
 * concurrently is either seen here (its row is re-read) or sees the mark.
 */
export function watchRunStatement(db: Kysely<LedgerflowDatabase>, runId: string) {
  return db
    .updateTable('ledgerflow.workflow_run')
    .set({ notify_settled: true })
    .where('id', '=', runId)
    .where('status', 'not in', SETTLED_RUN_STATUSES)
    .where('notify_settled', '=', false)
    .returning('status');
}

/** One wait's handle on the shared subscription. */
export interface RunWatch {
  /** Resolves once the subscription is up, or its attempt failed (then the wait polls). */
  readonly ready: Promise<void>;
  /** Whether notifications arrive now (the wait then polls only every `recheckMs`). */
  subscribed(): boolean;
  /**
   * Resolves after `ms` (`'timer'`), or sooner (`'woken'`): a notification for the run (also one
   * that arrived since the last call), the subscription went down or came back, or {@link wake}.
   * Then re-read the status.
   */
  next(ms: number): Promise<'woken' | 'timer'>;
  /** Wakes this wait as its run's notification would (the worker of this process settled the run). */
  readonly wake: () => void;
  /** The wait is over; the last release starts the linger. */
  release(): void;
}

interface Watcher {
  notified: boolean;
  wake: (() => void) | undefined;
}

export class SettledRunWaiters {
  readonly #store: Pick<Store, 'listen' | 'listenUnavailable'>;
  readonly #byRun = new Map<string, Set<Watcher>>();
  #active = 0;
  #state: 'none' | 'subscribing' | 'up' | 'down' = 'none';
  #subscribing: Promise<void> | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  #failedAttempts = 0;
  #retryTimer: NodeJS.Timeout | undefined;
  #lingerTimer: NodeJS.Timeout | undefined;

  constructor(store: Pick<Store, 'listen' | 'listenUnavailable'>) {
    this.#store = store;
  }

  watch(runId: string): RunWatch {
    const watcher: Watcher = { notified: false, wake: undefined };
    let watchers = this.#byRun.get(runId);
    if (watchers === undefined) this.#byRun.set(runId, (watchers = new Set()));
    watchers.add(watcher);
    this.#active++;
    clearTimeout(this.#lingerTimer);
    this.#lingerTimer = undefined;
    // A store that cannot listen (behind a transaction pooler with no URL to listen on): every wait polls at `pollMs`.
    if (this.#state === 'none' && this.#store.listenUnavailable === undefined) void this.#subscribe();
    const ready = this.#subscribing ?? Promise.resolve();
    let released = false;
    return {
      ready,
      subscribed: () => this.#state === 'up',
      next: (ms) =>
        new Promise<'woken' | 'timer'>((resolve) => {
          if (watcher.notified) {
            watcher.notified = false;
            resolve('woken');
            return;
          }
          const timer = setTimeout(() => done('timer'), ms);
          function done(why: 'woken' | 'timer'): void {
            clearTimeout(timer);
            watcher.wake = undefined;
            watcher.notified = false;
            resolve(why);
          }
          watcher.wake = () => done('woken');
        }),
      wake: () => this.#wake(watcher),
      release: () => {
        if (released) return;
        released = true;
        watcher.wake?.();
        watchers.delete(watcher);
        if (watchers.size === 0 && this.#byRun.get(runId) === watchers) this.#byRun.delete(runId);
        if (--this.#active === 0) this.#linger();
      },
    };
  }

  #notify(runId: string): void {
    for (const watcher of this.#byRun.get(runId) ?? []) this.#wake(watcher);
  }

  #wake(watcher: Watcher): void {
    if (watcher.wake !== undefined) watcher.wake();
    else watcher.notified = true;
  }

  #wakeAll(): void {
    for (const watchers of this.#byRun.values()) for (const watcher of watchers) this.#wake(watcher);
  }

  #subscribe(): Promise<void> {
    this.#subscribing ??= this.#listen().finally(() => (this.#subscribing = undefined));
    return this.#subscribing;
  }

  async #listen(): Promise<void> {
    const wasDown = this.#state === 'down';
    this.#state = 'subscribing';
    let lost = false;
    let unlisten: (() => Promise<void>) | undefined;
    try {
      unlisten = await this.#store.listen(
        RUN_SETTLED_CHANNEL,
        (runId) => this.#notify(runId),
        () => {
          lost = true;
          // Lost before `listen` returned: handled below. Lost after a newer subscription replaced it: ignored.
          if (unlisten === undefined || this.#unlisten !== unlisten) return;
          this.#unlisten = undefined;
          this.#down();
        },
        { keepProcessAlive: false },
      );
    } catch {
      this.#down();
      return;
    }
    if (lost || this.#active === 0) {
      await unlisten().catch(() => {});
      if (lost) this.#down();
      else this.#state = 'none';
      return;
    }
    this.#unlisten = unlisten;
    this.#state = 'up';
    this.#failedAttempts = 0;
    if (wasDown) this.#wakeAll();
  }

  /** Not subscribed: waits poll; retried after a backoff while anybody waits. */
  #down(): void {
    this.#state = 'down';
    this.#failedAttempts++;
    this.#wakeAll();
    if (this.#active === 0) {
      this.#state = 'none';
      return;
    }
    clearTimeout(this.#retryTimer);
    this.#retryTimer = setTimeout(
      () => {
        this.#retryTimer = undefined;
        if (this.#active === 0) this.#state = 'none';
        else void this.#subscribe();
      },
      exponentialBackoffMs(this.#failedAttempts, RELISTEN_BACKOFF),
    );
    this.#retryTimer.unref();
  }

  #linger(): void {
    this.#lingerTimer = setTimeout(() => {
      this.#lingerTimer = undefined;
      if (this.#active > 0 || this.#state !== 'up') return;
      const unlisten = this.#unlisten;
      this.#unlisten = undefined;
      this.#state = 'none';
      void unlisten?.().catch(() => {});
    }, LINGER_MS);
    this.#lingerTimer.unref();
  }
}

/** A status in which `waitForRun` returns. */
export function isSettled(status: RunStatus): status is SettledRunStatus {
  return runStatusIn(SETTLED_RUN_STATUSES, status);
}
