import { sql, type RawBuilder } from 'kysely';
import { prepared } from '../store/prepared.js';
import { recordOfSlots, shapeOf, Shapes } from '../store/statement-shapes.js';
import type { LeasedRunRow, StartCompletion } from '../store/leased-run.js';
import { carriedAttemptsCte, carriedResultCtes } from '../store/carried-rows.js';
import { millis } from '../store/millis.js';
import { assertAttemptTransition, assertRunTransition } from '../store/state-machines.js';
import { RUNS_CHANNEL } from '../store/channels.js';
import { DEFERRED_START_FENCING_TOKEN } from './deferred-start.js';

/*
 * A start's one statement (start-run.ts decides what it writes): the run inserted `pending` — or,
 * for a worker of this process with a slot free, inserted already claimed with its first attempt
 * open (`(none) -> running`) — unless its id or dedupe key exists, live or archived. Built and
 * compiled once per shape of columns (store/statement-shapes.ts). No state but those shapes.
 */

/** The columns a start writes, and the SQL type each value is cast to in the insert's SELECT. */
const RUN_COLUMN_TYPES = {
  id: 'uuid',
  workflow_name: 'text',
  workflow_version: 'integer',
  input: 'jsonb',
  dedupe_key: 'text',
  deadline_at: 'timestamptz',
  priority: 'integer',
  debounce_key: 'text',
  debounce_open: 'boolean',
  created_at: 'timestamptz',
  run_after: 'timestamptz',
  trace_context: 'jsonb',
  notify_settled: 'boolean',
} as const;

export type StartedRunColumns = {
  readonly [C in keyof typeof RUN_COLUMN_TYPES]?: string | number | boolean | null | RawBuilder<unknown>;
};

/** How a start's insert leases its new run to a worker of the same process (see {@link insertRunStatement}). */
export interface ClaimedBy {
  readonly workerId: string;
  readonly leaseMs: number;
  /** The workflow's first step: its attempt 1 is opened by the same statement. */
  readonly step: string;
  /**
   * A deferred insert (PendingStart): how long ago, by the worker's clock, the start handed the
   * run over. The run's `created_at` and its first attempt's `started_at` are set that far back,
   * as if the row had been inserted then (a deadline likewise counts from then: see `columns`).
   */
  readonly startedMsAgo?: number;
  /**
   * A deferred insert that is also the run's completion (`PendingStart.insertCompleted`): the run
   * is inserted `completed`, with its steps' attempts and results, instead of claimed.
   */
  readonly completion?: StartCompletion;
}

interface InsertRunOptions {
  readonly guarded: boolean;
  readonly notify: boolean;
  readonly claimedBy?: ClaimedBy;
}

/**
 * A start's insert: one statement, `INSERT … SELECT … ON CONFLICT DO NOTHING` (never raises on a
 * conflict, so a caller's transaction is not aborted) and, only if it inserted and `notify`, the
 * NOTIFY (delivered at commit: a worker never wakes for a run it cannot see yet). `guarded`: the
 * SELECT yields no row when `ledgerflow.pruned_run` finds the run's id or dedupe key archived —
 * checked inside the same statement, after waiting for a prune that holds the live run.
 *
 * `claimedBy` (a start for a worker of this process with a slot free): the run is inserted
 * already claimed — `running`, leased to that worker, its first fencing token (1 on a server that
 * never failed over; a deferred start's is always 1, see deferred-start.ts) — and the same statement
 * opens attempt 1 of its first step, returning it as the claim does (a `LeasedRunRow`): what the
 * claim statement would have done to a run it found pending, due and registered, which a run
 * this start creates is (the reservation checked that the worker serves its version). A run
 * created this way was never `pending`: `(none) -> running` in the state machine.
 */
export function insertRunStatement(
  columns: StartedRunColumns,
  options: InsertRunOptions & { readonly claimedBy: ClaimedBy },
): RawBuilder<LeasedRunRow>;
export function insertRunStatement(columns: StartedRunColumns, options: InsertRunOptions): RawBuilder<{ id: string }>;
export function insertRunStatement(
  columns: StartedRunColumns,
  options: InsertRunOptions,
): RawBuilder<{ id: string } | LeasedRunRow> {
  const names = Object.keys(columns) as (keyof typeof RUN_COLUMN_TYPES)[];
  const claimedBy = options.claimedBy;
  // Built once per set of columns (a start pays no tree walk), unless a column is an expression
  // with values of its own (a deadline, a debounce window): those are built in full.
  if (names.some((name) => isRawBuilder(columns[name]))) return prepared(buildInsertRun(columns, names, options));
  const ago = claimedBy?.startedMsAgo;
  const completion = claimedBy?.completion === undefined ? undefined : completionRecord(claimedBy.completion);
  const values = [
    ...names.map((name) => columns[name]),
    ...(claimedBy ? [claimedBy.workerId, claimedBy.leaseMs, claimedBy.step] : []),
    ...(ago !== undefined ? [ago] : []),
    ...(completion !== undefined ? Object.values(completion) : []),
  ];
  const completionShape =
    completion === undefined ? 'none' : completion.carriedRows === undefined ? 'alone' : 'carried';
  return shapeOf(
    insertRunShapes.for(
      `${names.join(',')}|${options.guarded}|${options.notify}|${claimedBy !== undefined}|${ago !== undefined}|${completionShape}`,
    ),
    values,
    (...slots) => {
      const at = names.length + 3 + (ago !== undefined ? 1 : 0);
      return prepared(
        buildInsertRun(Object.fromEntries(names.map((name, i) => [name, slots[i]])) as StartedRunColumns, names, {
          ...options,
          ...(claimedBy
            ? {
                claimedBy: {
                  workerId: slots[names.length],
                  leaseMs: slots[names.length + 1],
                  step: slots[names.length + 2],
                  ...(ago !== undefined ? { startedMsAgo: slots[names.length + 3] } : {}),
                  ...(completion !== undefined
                    ? { completion: completionOf(recordOfSlots(completion, slots.slice(at))) }
                    : {}),
                } as ClaimedBy,
              }
            : {}),
        }),
      );
    },
  );
}

/**
 * A completion as the flat record of values its statement sends (a carry's two only when it has
 * one), always in this key order: the order its cached shape's slots were made in.
 */
function completionRecord(c: StartCompletion) {
  return {
    stepName: c.stepName,
    stepKind: c.stepKind,
    attempt: c.attempt,
    output: c.output,
    runOutput: c.runOutput,
    toPosition: c.toPosition,
    ...(c.carried !== undefined ? { carriedRows: c.carried.rows, stepStartAgo: c.carried.stepStartAgo } : {}),
  };
}

/** {@link completionRecord} read back (as slots, when a shape is built). */
function completionOf(r: ReturnType<typeof completionRecord>): StartCompletion {
  const { carriedRows, stepStartAgo, ...step } = r;
  return carriedRows === undefined || stepStartAgo === undefined
    ? step
    : { ...step, carried: { rows: carriedRows, stepStartAgo } };
}

const insertRunShapes = new Shapes();

function buildInsertRun(
  columns: StartedRunColumns,
  names: readonly (keyof typeof RUN_COLUMN_TYPES)[],
  options: InsertRunOptions,
): RawBuilder<{ id: string } | LeasedRunRow> {
  const values = names.map((name) => {
    const value = columns[name];
    return isRawBuilder(value) ? value : sql`${value}::${sql.raw(RUN_COLUMN_TYPES[name])}`;
  });
  const guard = options.guarded
    ? sql`WHERE ledgerflow.pruned_run(${columns.id}::uuid, ${columns.workflow_name}::text, ${columns.dedupe_key ?? null}::text) IS NULL`
    : sql``;
  const claimedBy = options.claimedBy;
  if (claimedBy === undefined) {
    const notify = options.notify ? sql`pg_notify(${RUNS_CHANNEL}, inserted.id::text)` : sql`NULL`;
    return sql<{ id: string }>`
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run (${sql.join(names.map((name) => sql.ref(name)))})
      SELECT ${sql.join(values)}
      ${guard}
      ON CONFLICT DO NOTHING
      RETURNING id
    )
    SELECT inserted.id, ${notify} AS notified FROM inserted`;
  }
  if (claimedBy.completion !== undefined) return completedInsert(names, values, guard, claimedBy, claimedBy.completion);
  assertRunTransition('none', 'running');
  assertAttemptTransition('none', 'running');
  // A deferred insert back-dates the run's creation and its first attempt to when the start handed it over.
  const deferred = claimedBy.startedMsAgo !== undefined;
  const startedAt = deferred
    ? sql`statement_timestamp() - ${millis(claimedBy.startedMsAgo)}`
    : sql`statement_timestamp()`;
  // A token issued like any other (above the timeline's floor, core 0023) — but a deferred
  // insert's is the one its worker has driven the run under since the hand-over; its id is random,
  // so no lost timeline can have handed out a token for this run.
  const token = deferred ? sql.lit(DEFERRED_START_FENCING_TOKEN) : sql`ledgerflow.next_fencing_token(0)`;
  return sql<LeasedRunRow>`
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run (${sql.join(names.map((name) => sql.ref(name)))}, status, lease_owner, lease_expires_at, fencing_token, updated_at${sql.raw(deferred ? ', created_at' : '')})
      SELECT ${sql.join(values)}, 'running', ${claimedBy.workerId}::text, statement_timestamp() + ${millis(claimedBy.leaseMs)}, ${token}, statement_timestamp()${deferred ? sql`, ${startedAt}` : sql``}
      ${guard}
      ON CONFLICT DO NOTHING
      RETURNING id, workflow_name, workflow_version, input, current_step, fencing_token, deadline_at, trace_context
    ),
    opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT i.id, ${claimedBy.step}::text, 1, 'running', i.fencing_token, ${claimedBy.workerId}::text, ${startedAt}
        FROM inserted i
      RETURNING run_id, attempt
    )
    SELECT i.id, i.workflow_name, i.workflow_version, i.input, i.current_step, i.fencing_token,
           COALESCE(i.deadline_at <= statement_timestamp(), false) AS overdue, o.attempt,
           0 AS prior_failures, 0 AS crashes, false AS repeated_crash, false AS took_over, i.trace_context,
           NULL::jsonb AS outputs
      FROM inserted i
      JOIN opened o ON o.run_id = i.id`;
}

/**
 * A deferred start whose first commit completes the run (`PendingStart.insertCompleted`): the run
 * inserted `completed` — never `running` in the database, `(none) -> completed` — with what the
 * claimed insert and then the completion commit would have written: the carried steps' results and
 * attempts, the completing step's result and its attempt `succeeded`, every attempt under the
 * deferred start's token, dated by the worker's measures on the statement's clock. No trigger has
 * work to do: the run has no parent, no children, no queue slot (a step that asks for one is
 * never carried nor completes a run uninserted) and is watched here (`notify_settled` unset).
 */
function completedInsert(
  names: readonly (keyof typeof RUN_COLUMN_TYPES)[],
  values: readonly RawBuilder<unknown>[],
  guard: RawBuilder<unknown>,
  claimedBy: ClaimedBy,
  c: StartCompletion,
): RawBuilder<{ id: string }> {
  assertRunTransition('none', 'completed');
  assertAttemptTransition('none', 'succeeded');
  const handedOver = sql`statement_timestamp() - ${millis(claimedBy.startedMsAgo ?? 0)}`;
  // Without a carry the step started at the hand-over, as the claimed insert dates its attempt.
  const stepStarted =
    c.carried === undefined ? handedOver : sql`statement_timestamp() - ${millis(c.carried.stepStartAgo)}`;
  const carried =
    c.carried === undefined
      ? sql``
      : sql`,
    ${carriedResultCtes(c.carried.rows, sql`f.workflow_name`, sql`f.workflow_version`, 'inserted')},
    ${carriedAttemptsCte('inserted', sql`f.fencing_token`, sql`${claimedBy.workerId}::text`, false)}`;
  return sql<{ id: string }>`
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run (${sql.join(names.map((name) => sql.ref(name)))}, status, current_step, fencing_token, output, updated_at, finished_at, created_at)
      SELECT ${sql.join(values)}, 'completed', ${c.toPosition}::int, ${sql.lit(DEFERRED_START_FENCING_TOKEN)}, ${c.runOutput}::jsonb, statement_timestamp(), statement_timestamp(), ${handedOver}
      ${guard}
      ON CONFLICT DO NOTHING
      RETURNING id, workflow_name, workflow_version, fencing_token
    )${carried},
    result AS (
      INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, skipped)
      SELECT i.id, i.workflow_name, i.workflow_version, ${c.stepName}::text, ${c.stepKind}::text, ${c.output}::jsonb, ${c.attempt}::int, false
        FROM inserted i
      RETURNING 1
    ),
    finished AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT i.id, ${c.stepName}::text, ${c.attempt}::int, 'succeeded', i.fencing_token, ${claimedBy.workerId}::text, ${stepStarted}, statement_timestamp()
        FROM inserted i
      RETURNING 1
    )
    SELECT i.id FROM inserted i`;
}

function isRawBuilder(value: unknown): value is RawBuilder<unknown> {
  return typeof value === 'object' && value !== null && 'isRawBuilder' in value;
}
