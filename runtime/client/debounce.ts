import { sql, type Kysely, type RawBuilder } from 'kysely';
import { z } from 'zod';
import { ALWAYS_CHECKED, optionProblems, rule } from '../../dsl/option-checks.js';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { ValidationError } from '../errors.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { millis } from '../store/millis.js';
import { assertRunTransition } from '../store/state-machines.js';

/*
 * Debounced starts: many starts of one workflow with one debounce key, within a window, make ONE
 * run. The first start opens the window: its run is inserted `pending`, due at the end of the
 * window (run_after, database time), so no worker claims it before. A later start while the window
 * is open joins that run (`created: false`):
 *
 *   keep 'first'  the run stays as the first start made it; the later start's input is ignored.
 *   keep 'last'   the later start's input (validated first) replaces the run's, together with its
 *                 version, deadline and priority: the latest start wins. The window is TRAILING:
 *                 each such start moves its end to windowMs after itself (never earlier), bounded
 *                 by `maxWaitMs` after the window's first start when given (`maxWaitMs: windowMs`
 *                 is a window fixed at the first start).
 *
 * The window is open while the run is pending, was never claimed (fencing_token = 0), is not due
 * yet and no start closed it (debounce_open); core migration 0006 says why each. Once a worker
 * claimed the run, or the window is over, the next start opens a new window with a new run.
 *
 * One start, in rounds of up to three statements (each its own commit outside a transaction):
 *   1. join the open window (keep 'first': read it; keep 'last': one UPDATE guarded by the window's
 *      conditions — a run a worker claimed meanwhile no longer matches and is not changed);
 *   2. close a window that is over but whose run no worker claimed yet (debounce_open = false);
 *   3. open a window: the run's INSERT … ON CONFLICT DO NOTHING. The partial unique index lets one
 *      open window exist per (workflow, key); a concurrent start that opened one first makes this
 *      insert wait for its commit and insert nothing, and the next round joins that window.
 * No statement raises on a conflict, so a caller's transaction (startInTransaction) is never
 * aborted by a concurrent start. Inside a caller's transaction the row the start inserted or
 * replaced stays locked until that transaction ends: other starts of the key wait for it there.
 */

/** `start(…, { debounce })`: see the header of this file for the rules. */
export interface DebounceOptions {
  /** Starts of this workflow with the same key share one window (e.g. `digest:${customerId}`); 1 to 1000 characters. */
  readonly key: string;
  /** The run becomes due this long after the start that opened the window (keep 'last': after the latest start). */
  readonly windowMs: number;
  /** Which start's input the run gets: the first in the window, or the last. */
  readonly keep: 'first' | 'last';
  /**
   * keep 'last' only: the run becomes due at most this long after the window's first start,
   * however often starts keep moving the window on (at least `windowMs`). Default: no bound.
   */
  readonly maxWaitMs?: number;
}

/** A debounced start, validated: what its statements need. */
export interface DebouncedStart {
  readonly workflow: AnyWorkflow;
  readonly key: string;
  readonly windowMs: number;
  readonly keep: 'first' | 'last';
  readonly maxWaitMs: number | undefined;
  /** The run id to insert if this start opens the window. */
  readonly runId: string;
  readonly inputJson: string;
  /** Counted from the moment the run becomes due, not from the start (see {@link openWindowColumns}). */
  readonly timeoutMs: number | undefined;
  readonly priority: number | undefined;
}

/** The columns of the run a debounced start inserts, on top of a plain start's. */
export interface DebouncedRunColumns {
  readonly debounce_key: string;
  readonly debounce_open: true;
  readonly created_at: RawBuilder<Date>;
  readonly run_after: RawBuilder<Date>;
  readonly deadline_at: RawBuilder<Date> | null;
}

const MAX_DEBOUNCE_KEY_LENGTH = 1_000;
/** Each round that does not return saw a window close (claimed or over) since the previous one. */
const MAX_ROUNDS = 10;

const milliseconds = rule(z.number().gt(0).max(Number.MAX_SAFE_INTEGER), 'must be a number of milliseconds > 0');

/** What {@link DebounceOptions} allow; `maxWaitMs` only with keep 'last', and never under the window. */
const debounceOptionsSchema = z
  .object({
    key: rule(z.string(), 'must be a string').refine(
      (key) => key.length >= 1 && key.length <= MAX_DEBOUNCE_KEY_LENGTH,
      {
        error: (issue) =>
          `must be 1 to ${MAX_DEBOUNCE_KEY_LENGTH} characters long (got ${(issue.input as string).length})`,
      },
    ),
    windowMs: milliseconds,
    keep: rule(z.enum(['first', 'last']), "must be 'first' or 'last'"),
    maxWaitMs: milliseconds.optional(),
  })
  .superRefine(({ windowMs, keep, maxWaitMs }, ctx) => {
    if (maxWaitMs === undefined) return;
    if (keep === 'first') {
      ctx.addIssue({
        code: 'custom',
        path: ['maxWaitMs'],
        message: "only for keep 'last' (with keep 'first' the window never moves); remove it",
      });
    } else if (
      milliseconds.safeParse(maxWaitMs).success &&
      milliseconds.safeParse(windowMs).success &&
      maxWaitMs < windowMs
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['maxWaitMs'],
        message: `must be at least windowMs (${windowMs}); got ${maxWaitMs}`,
      });
    }
  }, ALWAYS_CHECKED);

/**
 * Checks `debounce` and what it is combined with, before anything is written; `undefined` when
 * the start is not debounced.
 */
export function parseDebounce(
  debounce: DebounceOptions | undefined,
  others: { readonly runId: string | undefined; readonly dedupeKey: string | undefined },
): DebounceOptions | undefined {
  if (debounce === undefined) return undefined;
  if (typeof debounce !== 'object' || debounce === null) {
    throw new ValidationError('debounce must be an object { key, windowMs, keep }. Nothing was written.', [
      'debounce: not an object',
    ]);
  }
  const problems = optionProblems(debounceOptionsSchema, debounce, { name: 'debounce', separator: ': ', show: shown });
  if (others.dedupeKey !== undefined) {
    problems.push(
      'debounce with dedupeKey: a dedupe key names one run forever, a debounce key one run per window; pass one of them',
    );
  }
  if (others.runId !== undefined) {
    problems.push(
      'debounce with runId: a debounced start may join a run that already has its id; drop runId and use the returned runId',
    );
  }
  if (problems.length > 0) {
    throw new ValidationError(
      `Invalid debounce options:\n${problems.map((p) => `  - ${p}`).join('\n')}\nNothing was written.`,
      problems,
    );
  }
  return debounce;
}

function shown(value: unknown): string {
  return typeof value === 'string'
    ? JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)
    : String(value);
}

/**
 * Joins the open window of `start.key`, or opens one with `insert` (the run's INSERT … ON CONFLICT
 * DO NOTHING with these columns added; true when it inserted).
 */
export async function startDebounced(
  db: Kysely<LedgerflowDatabase>,
  start: DebouncedStart,
  insert: (columns: DebouncedRunColumns) => Promise<boolean>,
): Promise<{ readonly runId: string; readonly created: boolean }> {
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const joined = await (start.keep === 'first'
      ? findWindowStatement(db, start.workflow.name, start.key).executeTakeFirst()
      : replaceInWindowStatement(db, start).executeTakeFirst());
    if (joined !== undefined) return { runId: joined.id, created: false };
    await closeWindowStatement(db, start.workflow.name, start.key).execute();
    if (await insert(openWindowColumns(start))) return { runId: start.runId, created: true };
  }
  throw new Error(
    `The debounce window of key "${start.key}" (workflow "${start.workflow.name}") closed ${MAX_ROUNDS} times while this start ` +
      'tried to join or open one: workers claim its runs as fast as they are due. Nothing was written; start again, or use a longer windowMs.',
  );
}

/** The conditions of an open window (see the header): every join and close is guarded by them. */
function inWindow(workflowName: string, key: string): RawBuilder<boolean> {
  return sql<boolean>`workflow_name = ${workflowName} AND debounce_key = ${key} AND debounce_open AND status = 'pending' AND fencing_token = 0`;
}

/** keep 'first': the run of the key's open window, left as it is. */
export function findWindowStatement(db: Kysely<LedgerflowDatabase>, workflowName: string, key: string) {
  return db
    .selectFrom('ledgerflow.workflow_run')
    .select('id')
    .where(inWindow(workflowName, key))
    .where(sql<boolean>`run_after > statement_timestamp()`);
}

/**
 * keep 'last': the run of the key's open window gets this start's input, version, deadline and
 * priority, and the window's end moves on (see {@link dueAfterJoin}) — one statement guarded by
 * the window's conditions, so a run a worker claimed meanwhile does not match and is not changed.
 */
export function replaceInWindowStatement(db: Kysely<LedgerflowDatabase>, start: DebouncedStart) {
  assertRunTransition('pending', 'pending');
  const now = sql<Date>`statement_timestamp()`;
  const due = dueAfterJoin(start);
  return db
    .updateTable('ledgerflow.workflow_run')
    .set({
      input: start.inputJson,
      workflow_version: start.workflow.version,
      run_after: due,
      deadline_at: start.timeoutMs === undefined ? null : sql<Date>`${due} + ${millis(start.timeoutMs)}`,
      priority: start.priority ?? 0,
      updated_at: now,
    })
    .where(inWindow(start.workflow.name, start.key))
    .where(sql<boolean>`run_after > ${now}`)
    .returning('id');
}

/**
 * Closes the key's window that is over (due) while its run is still pending and unclaimed: the run
 * stays pending and is claimed as usual, and a new window may open.
 */
export function closeWindowStatement(db: Kysely<LedgerflowDatabase>, workflowName: string, key: string) {
  assertRunTransition('pending', 'pending');
  return db
    .updateTable('ledgerflow.workflow_run')
    .set({ debounce_open: false, updated_at: sql<Date>`statement_timestamp()` })
    .where(inWindow(workflowName, key))
    .where(sql<boolean>`run_after <= statement_timestamp()`);
}

/**
 * A window opens at this statement's time and ends `windowMs` later (maxWaitMs is at least that);
 * the deadline (`timeoutMs`) counts from then — a run is not overdue for waiting out its window.
 */
export function openWindowColumns(start: DebouncedStart): DebouncedRunColumns {
  const due = sql<Date>`statement_timestamp() + ${millis(start.windowMs)}`;
  return {
    debounce_key: start.key,
    debounce_open: true,
    // The window's first start: what maxWaitMs counts from (the default, now(), is the transaction's start).
    created_at: sql<Date>`statement_timestamp()`,
    run_after: due,
    deadline_at: start.timeoutMs === undefined ? null : sql<Date>`${due} + ${millis(start.timeoutMs)}`,
  };
}

/** keep 'last': windowMs after this start, at most maxWaitMs after the first, never earlier than it was. */
function dueAfterJoin(start: DebouncedStart): RawBuilder<Date> {
  const trailing = sql`statement_timestamp() + ${millis(start.windowMs)}`;
  const bounded =
    start.maxWaitMs === undefined ? trailing : sql`least(${trailing}, created_at + ${millis(start.maxWaitMs)})`;
  return sql<Date>`greatest(run_after, ${bounded})`;
}
