/**
 * The waits of this process for runs that this worker may settle (`waitForRun` and
 * `startAndWait` of a client created with the worker, `createClient({ store, worker })`), answered
 * in-process: when a flight's fenced commit settles a run somebody here waits for, the driver
 * hands over what that commit wrote — status, output, error, in their stored form — and the wait
 * returns it without a statement. Waits of other processes, and of clients without the worker,
 * keep the database path (the settling commit's NOTIFY, a re-read; wait-for-run.ts). It lives
 * with the waits, in the client: the worker makes its one instance, hands it what its flights
 * settle (worker/worker.ts, worker/run-driver.ts) and offers it to the client with its
 * `LocalStarts` (local-starts.ts).
 *
 * A watcher, per wait:
 *
 *   watching ──a flight of this worker settles the run (fenced commit known committed)──▶ answered
 *   watching ──a flight of the run ends or is aborted without settling it──▶ watching (woken: read)
 *   watching ──the wait ends (answered from the database, timed out, failed)──▶ gone (unwatched)
 *
 * The run's own settling commit also notifies (the mark stays), and that notification may be
 * heard before the driver hands its answer over (PGlite delivers it inside the commit). So a wait
 * woken by a notification while a flight of this worker drives the run ({@link LocalWatch.driven})
 * does not read: the flight answers, or its end wakes the wait again. A settle by anybody else
 * while the flight runs (a cancel) fences that flight out; the wait reads once the flight ends,
 * is aborted (the lease keeper's renewal finds the lease gone), or at its next recheck.
 *
 * Only `completed` and `failed` are answered here (a step's completion, a failure for good): the
 * driver holds all they wrote. Every other end (cancelled, compensated, compensation_failed,
 * needs_reconciliation), a commit whose outcome was unknown, and every run this worker does not
 * drive are the database path's: the wait never relies on this answer, it only may take it first.
 * So a run settles its waiters at most once here, and wakes only the waits of that run (a map
 * lookup, no herd); a run nobody here waits for costs one lookup.
 */

import type { SettledRun } from './run-details.js';

/** One wait's handle: its answer once this worker settled the run. */
export interface LocalWatch {
  /** What the settling commit wrote, once a flight of this worker settled the run. */
  answer(): SettledRun | undefined;
  /** A flight of this worker drives the run now (not aborted): it will answer, or its end wakes the wait. */
  driven(): boolean;
  /** The wait is over. */
  unwatch(): void;
}

interface Watcher {
  answer: SettledRun | undefined;
  readonly wake: () => void;
}

export class LocalWaiters {
  readonly #byRun = new Map<string, Set<Watcher>>();
  readonly #drives: (runId: string) => boolean;

  /** `drives`: whether a flight of the worker, not aborted, drives the run. */
  constructor(drives: (runId: string) => boolean) {
    this.#drives = drives;
  }

  /** Watches `runId`; `wake` is called once when the answer arrives. Watch before the run can settle (before its start). */
  watch(runId: string, wake: () => void): LocalWatch {
    const watcher: Watcher = { answer: undefined, wake };
    let watchers = this.#byRun.get(runId);
    if (watchers === undefined) this.#byRun.set(runId, (watchers = new Set()));
    watchers.add(watcher);
    const all = watchers;
    return {
      answer: () => watcher.answer,
      driven: () => this.#drives(runId),
      unwatch: () => {
        all.delete(watcher);
        if (all.size === 0 && this.#byRun.get(runId) === all) this.#byRun.delete(runId);
      },
    };
  }

  /** Whether a wait of this process watches the run: the driver builds an answer only then. */
  watches(runId: string): boolean {
    return this.#byRun.has(runId);
  }

  /**
   * A flight of this worker settled `run.id` by a commit known to be committed; `run` is what that
   * commit wrote, in stored form (`toStoredJson`, `withStoredOutput`). Each wait gets its own copy
   * of output and error past the first (a caller may change what it got).
   */
  /** A flight of the run ended or was aborted (settled or not): its waits look again. */
  flightOver(runId: string): void {
    const watchers = this.#byRun.get(runId);
    if (watchers === undefined) return;
    for (const watcher of watchers) watcher.wake();
  }

  settled(run: SettledRun): void {
    const watchers = this.#byRun.get(run.id);
    if (watchers === undefined) return;
    let first = true;
    for (const watcher of watchers) {
      if (watcher.answer !== undefined) continue;
      watcher.answer = first ? run : structuredClone(run);
      first = false;
      watcher.wake();
    }
  }
}
