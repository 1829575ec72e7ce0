import type { Kysely } from 'kysely';
import { z } from 'zod';
import { checkOptions, rule } from '../../dsl/option-checks.js';
import { WaitTimeoutError } from '../errors.js';
import { missingRunError } from '../retention/missing-run-error.js';
import type { LedgerflowDatabase, RunStatus } from '../store/tables.js';
import type { SettledRun } from './run-details.js';
import { isSettled, watchRunStatement, type SettledRunWaiters } from './settled-run-waiters.js';
import type { WatchedStartedRun } from './start-run.js';
import type { DeferredInsert } from './deferred-start.js';
import { assertRunId } from './validate-input.js';
import { invalidOption } from './invalid-option.js';
import { isConnectionError } from '../store/connection-errors.js';
import type { LocalWaiters } from './local-waiters.js';

export interface WaitOptions {
  /** Give up (WaitTimeoutError) after this long. Default 30 000. */
  readonly timeoutMs?: number;
  /**
   * How often the run's status is read while the client cannot hear completion notifications
   * (its listening connection is being opened again after a loss, or was refused). Default 250.
   */
  readonly pollMs?: number;
  /**
   * How often the status is read anyway while notifications arrive, in case one is lost without
   * the connection saying so. Default 5 000.
   */
  readonly recheckMs?: number;
}

interface Wait {
  readonly timeoutMs: number;
  readonly deadline: number;
  readonly pollMs: number;
  readonly recheckMs: number;
}

/** The longest delay a timer takes (2^31 - 1 ms); a longer one would fire at once. */
const MAX_TIMER_MS = 2_147_483_647;

const waitMilliseconds = (min: number) =>
  rule(z.number().min(min).max(MAX_TIMER_MS), `must be a number of milliseconds from ${min} to ${MAX_TIMER_MS}`);

/** What {@link WaitOptions} allow. */
const waitOptionsSchema = z.object({
  timeoutMs: waitMilliseconds(0).optional(),
  pollMs: waitMilliseconds(1).optional(),
  recheckMs: waitMilliseconds(1).optional(),
});

/** Validated wait options, with the deadline fixed now. */
export function parseWaitOptions(options: WaitOptions = {}): Wait {
  checkOptions(waitOptionsSchema, options, invalidOption);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const pollMs = options.pollMs ?? 250;
  const recheckMs = options.recheckMs ?? 5_000;
  return { timeoutMs, deadline: Date.now() + timeoutMs, pollMs, recheckMs };
}

/**
 * Waits until the run is settled (`SETTLED_RUN_STATUSES`) and returns how it ended, woken by the
 * notification its settling transaction sends (core 0011) rather than by polling. The order
 * makes a lost wake-up impossible: subscribed first, then the run marked and its status read in
 * one statement; whatever settles it after that read sees the mark and notifies this
 * subscription. With `start` (startAndWait), the run is inserted already marked instead, when the
 * start creates it under `runId`; a start that finds another run waits for that one.
 *
 * With `local` (the worker of this process, `createClient({ store, worker })`), the wait is also
 * watched in-process before the start: when a flight of that worker settles the run, the wait
 * returns what the settling commit wrote, as soon as it is committed, with no statement — not the
 * re-read, and no notification needed (local-waiters.ts). A run the start claimed for that worker
 * is even inserted unmarked (`unmarked`): the wait marks it the moment no flight of the worker
 * drives it any more without having answered, so that whoever settles it then notifies. A wait
 * that begins while a flight of that worker drives the run (`start`, then `waitForRun`) likewise
 * neither marks nor reads until that flight ends without answering. Each wake-up otherwise costs
 * one statement: the run's status, output and error in one read.
 *
 * A read that meets a lost connection (a server restart, a failover: {@link isConnectionError})
 * does not end the wait: it reads again every `pollMs` until the deadline, marking the run again
 * first (a failover to an asynchronous standby can lose the mark), and a wait that reaches its
 * deadline without an answer throws `WaitTimeoutError` saying the database did not answer, with
 * the last connection error as its `cause`. The start of `startAndWait` is not retried: it throws
 * the connection error as `start` does (call it again; with a `dedupeKey` that is safe).
 */
export async function waitForRun(
  db: Kysely<LedgerflowDatabase>,
  waiters: SettledRunWaiters,
  runId: string,
  wait: Wait,
  local: LocalWaiters | undefined,
  start?: () => Promise<WatchedStartedRun>,
): Promise<SettledRun> {
  assertRunId(runId);
  const watch = waiters.watch(runId);
  const here = local?.watch(runId, watch.wake);
  try {
    await watch.ready;
    // The status as of the last read, and whether it is still current (not slept on since).
    let status: RunStatus | undefined;
    let current = false;
    // The run is marked — or needs no mark yet: `unmarked`, held by a flight here that answers.
    let marked = false;
    let unmarked = false;
    // A run handed to the worker here uninserted (deferred-start.ts): it has a row only once its insert committed.
    let deferred: DeferredInsert | undefined;
    if (start !== undefined) {
      const started = await start();
      if (started.runId !== runId) return await waitForRun(db, waiters, started.runId, wait, local);
      if (started.created) {
        status = 'pending';
        current = true;
        marked = true;
        unmarked = started.unmarked === true;
        deferred = started.deferred;
      }
    } else if (here?.driven() === true) {
      // A flight of this worker drives the run now (start, then wait): it answers, or its end wakes
      // this wait — which then marks and reads. Until then nothing to mark and nothing to read.
      [status, current, marked, unmarked] = ['running', true, true, true];
    }
    let unreachable: Error | undefined;
    let woken: 'woken' | 'timer' | undefined;
    for (;;) {
      const answered = here?.answer();
      if (answered !== undefined) return answered;
      const driven = here?.driven() === true;
      // Inserted unmarked and no flight here drives it any more (released, rescheduled, suspended,
      // aborted, never launched): mark it now, before reading — a later settle then notifies.
      if (unmarked && !driven) {
        // Not inserted by the worker before its flight ended: the start inserts it itself, as without a worker.
        if (deferred !== undefined) {
          const outcome = await within(deferred.outcome, wait.deadline - Date.now());
          if (outcome === undefined) throw timedOut(runId, wait, status, undefined);
          if (outcome === 'given-up') await deferred.insertUnclaimed();
        }
        [unmarked, marked, current, deferred] = [false, false, false, undefined];
      }
      // Woken while a flight of this process drives the run (its own settling commit's
      // notification, heard first): that flight answers, or its end wakes this wait. Timers read.
      const flightAnswers = woken === 'woken' && marked && driven;
      if (!flightAnswers) {
        try {
          if (!marked) {
            const seen = await markAndRead(db, runId);
            marked = true;
            if (seen !== undefined) [status, current] = [seen, true];
          }
          if (!current) {
            const run = await readRun(db, runId);
            if (isSettledRun(run)) return run;
            [status, current] = [run.status, true];
          }
          unreachable = undefined;
        } catch (error) {
          if (!isConnectionError(error)) throw error;
          unreachable = error as Error;
          marked = false;
        }
      }
      const remaining = wait.deadline - Date.now();
      if (remaining <= 0) throw timedOut(runId, wait, status, unreachable);
      woken = await watch.next(
        Math.min(remaining, unreachable !== undefined || !watch.subscribed() ? wait.pollMs : wait.recheckMs),
      );
      current = false;
    }
  } finally {
    here?.unwatch();
    watch.release();
  }
}

/** `promise`'s value, or `undefined` if it has not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), Math.max(0, ms)))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function timedOut(
  runId: string,
  wait: Wait,
  status: RunStatus | undefined,
  unreachable: Error | undefined,
): WaitTimeoutError {
  if (unreachable === undefined) {
    return new WaitTimeoutError(
      `Run ${runId} is still ${status} after ${wait.timeoutMs} ms; it goes on, wait again or inspect it.`,
    );
  }
  return new WaitTimeoutError(
    `Run ${runId}: the database did not answer before the wait's ${wait.timeoutMs} ms ran out (${unreachable.message}); ` +
      'the run goes on where the database has it: wait again once it answers.',
    { cause: unreachable },
  );
}

/** The run's status as of its mark; `undefined` when the mark found nothing to mark (settled, marked before, or missing). */
async function markAndRead(db: Kysely<LedgerflowDatabase>, runId: string): Promise<RunStatus | undefined> {
  const marked = await watchRunStatement(db, runId).executeTakeFirst();
  return marked?.status;
}

/** How the run is now: one read of the columns a wait returns. `RunPrunedError` / `RunNotFoundError` when it is gone. */
async function readRun(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
): Promise<Omit<SettledRun, 'status'> & { readonly status: RunStatus }> {
  const row = await db
    .selectFrom('ledgerflow.workflow_run')
    .select(['id', 'workflow_name', 'workflow_version', 'status', 'output', 'error'])
    .where('id', '=', runId)
    .executeTakeFirst();
  if (row === undefined) throw await missingRunError(db, runId);
  return row;
}

function isSettledRun(run: Omit<SettledRun, 'status'> & { readonly status: RunStatus }): run is SettledRun {
  return isSettled(run.status);
}
