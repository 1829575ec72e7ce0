import type { Kysely } from 'kysely';
import { ValidationError, WaitTimeoutError } from '../errors.js';
import { missingRunError } from '../retention/pruned-run.js';
import type { LedgerflowDatabase, RunStatus } from '../store/tables.js';
import { loadRunDetails, type RunDetails } from './run-details.js';
import { isSettled, watchRunStatement, type SettledRunWaiters } from './settled-run-waiters.js';
import type { StartedRun } from './start-run.js';
import { assertRunId } from './validate-input.js';
import { isConnectionError } from '../worker/step-errors.js';

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

/** Validated wait options, with the deadline fixed now. */
export function parseWaitOptions(options: WaitOptions = {}): Wait {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const pollMs = options.pollMs ?? 250;
  const recheckMs = options.recheckMs ?? 5_000;
  for (const [name, value, min] of [
    ['timeoutMs', timeoutMs, 0],
    ['pollMs', pollMs, 1],
    ['recheckMs', recheckMs, 1],
  ] as const) {
    if (!(typeof value === 'number' && value >= min && value <= 2_147_483_647)) {
      throw new ValidationError(`${name} must be a number of milliseconds from ${min} to 2147483647 (got ${String(value)}).`, [
        `${name}: ${String(value)}`,
      ]);
    }
  }
  return { timeoutMs, deadline: Date.now() + timeoutMs, pollMs, recheckMs };
}

/**
 * Waits until the run is settled (`SETTLED_RUN_STATUSES`) and returns it, woken by the
 * notification its settling transaction sends (core 0011) rather than by polling. The order
 * makes a lost wake-up impossible: subscribed first, then the run marked and its status read in
 * one statement; whatever settles it after that read sees the mark and notifies this
 * subscription. With `start` (startAndWait), the run is inserted already marked instead, when the
 * start creates it under `runId`; a start that finds another run waits for that one.
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
  start?: () => Promise<StartedRun>,
): Promise<RunDetails> {
  assertRunId(runId);
  const watch = waiters.watch(runId);
  try {
    await watch.ready;
    let status: RunStatus | undefined;
    let marked = false;
    if (start !== undefined) {
      const started = await start();
      if (started.runId !== runId) return await waitForRun(db, waiters, started.runId, wait);
      if (started.created) {
        status = 'pending';
        marked = true;
      }
    }
    let unreachable: Error | undefined;
    for (;;) {
      try {
        if (!marked) {
          status = await markAndRead(db, runId);
          marked = true;
        }
        const now = status ?? (await readStatus(db, runId));
        status = now;
        if (isSettled(now)) return await loadRunDetails(db, runId);
        unreachable = undefined;
      } catch (error) {
        if (!isConnectionError(error)) throw error;
        unreachable = error as Error;
        marked = false;
      }
      const remaining = wait.deadline - Date.now();
      if (remaining <= 0) throw timedOut(runId, wait, status, unreachable);
      await watch.next(Math.min(remaining, unreachable !== undefined || !watch.subscribed() ? wait.pollMs : wait.recheckMs));
      status = undefined;
    }
  } finally {
    watch.release();
  }
}

function timedOut(runId: string, wait: Wait, status: RunStatus | undefined, unreachable: Error | undefined): WaitTimeoutError {
  if (unreachable === undefined) {
    return new WaitTimeoutError(`Run ${runId} is still ${status} after ${wait.timeoutMs} ms; it goes on, wait again or inspect it.`);
  }
  return new WaitTimeoutError(
    `Run ${runId}: the database did not answer before the wait's ${wait.timeoutMs} ms ran out (${unreachable.message}); ` +
      'the run goes on where the database has it: wait again once it answers.',
    { cause: unreachable },
  );
}

async function markAndRead(db: Kysely<LedgerflowDatabase>, runId: string): Promise<RunStatus> {
  const marked = await watchRunStatement(db, runId).executeTakeFirst();
  return marked?.status ?? readStatus(db, runId);
}

async function readStatus(db: Kysely<LedgerflowDatabase>, runId: string): Promise<RunStatus> {
  const row = await db.selectFrom('ledgerflow.workflow_run').select('status').where('id', '=', runId).executeTakeFirst();
  if (row === undefined) throw await missingRunError(db, runId);
  return row.status;
}
