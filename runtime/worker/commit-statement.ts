import { sql, type RawBuilder } from 'kysely';
import { prepared } from '../store/prepared.js';
import { Shapes, type ShapeSlot } from '../store/statement-shapes.js';
import { assertAttemptTransition, assertRunTransition } from '../store/state-machines.js';
import { carryCtes, carriedRunCreation, carryingAttemptStart, type CarryValues } from './carried-prefix.js';
import { claimOptionsKey, claimParts, FUSED_CLAIM, reusedClaimParts, type ClaimParts } from './claim.js';
import type { AdvanceParams, AdvanceRow, Continuation, FusedClaim, ResultEffect } from './result-commit.js';

/*
 * ONE definition of a result commit's writes, for one run and for a group alike: a commit is a
 * set of rows (`input`, one per run: {@link COLUMNS}), and every write joins to its row of
 * `fenced` — the runs the fenced UPDATE moved. One run's commit is a group of one whose row comes
 * as parameters (`advanceRunStatement`, step-commits.ts); a group's rows come as one jsonb parameter
 * (`advanceRunsStatement`). What the rows may differ on is the statement's shape
 * ({@link CommitShape}): where every row is alike (one run), each write is written for that case
 * alone; where they may differ (a group), a write tests each row's column (`i.target`,
 * `i.effect_mode`). A column, a write or a target added here reaches both statements.
 * Long because it is that one definition, on purpose (issue 28, item 4): columns, shapes and
 * writes in one place, so that a new column is one edit.
 */

const lit = (value: string): RawBuilder<unknown> => sql.lit(value);

/** The run status a commit moves its run to. */
export type CommitTarget = 'running' | 'pending' | 'completed' | 'compensated';

/** What a commit does to its step's ledger row (`none`: the step has none). */
export type EffectMode = ResultEffect['mode'] | 'none';

/** What a commit statement is written for: what its rows may be, decided per statement and not per value. */
export interface CommitShape {
  /** Where the rows move their runs: one target for one run, each the group may hold for a group. */
  readonly targets: readonly CommitTarget[];
  readonly effects: readonly EffectMode[];
  /**
   * The attempt that commits: `close` its running attempt; `carried` — it carries earlier steps,
   * so no commit opened it — insert it finished; `none`: the reconciler's commit has none.
   */
  readonly attempt: 'close' | 'carried' | 'none';
  /** A compensation's commit keeps the error that made the run compensate. */
  readonly keepsError: boolean;
  /** The rows' commits write the next step's intent ({@link NextIntent}). */
  readonly nextIntent: boolean;
}

/**
 * The group statement's shape: every result commit of a worker's attempt that needs no statement
 * of its own. Not a compensation's (it keeps the run's error and may end it `compensated`), nor
 * one that carries earlier steps (its rows are the carry's, not one per run), nor one that opens
 * the next step's intent (the perform waits for it), nor `fill-recorded` (it commits inside the
 * step's transaction, after the handler's writes), nor the reconciler's (no attempt).
 */
export const GROUP_SHAPE: CommitShape = {
  targets: ['running', 'pending', 'completed'],
  effects: ['none', 'reference', 'insert-recorded', 'record-intent'],
  attempt: 'close',
  keepsError: false,
  nextIntent: false,
};

export function commitShapeOf(p: AdvanceParams): CommitShape {
  const c = p.continuation;
  return {
    targets: [targetOf(c)],
    effects: [p.effect?.mode ?? 'none'],
    attempt: p.attempt === undefined ? 'none' : p.carry === undefined ? 'close' : 'carried',
    keepsError: p.step.compensates !== undefined,
    nextIntent: c.kind === 'hold' && c.intent !== undefined,
  };
}

export function targetOf(c: Continuation): CommitTarget {
  return c.kind === 'hold'
    ? 'running'
    : c.kind === 'release'
      ? 'pending'
      : c.compensated === true
        ? 'compensated'
        : 'completed';
}

/** A column of a commit's row: its SQL type, and its value for a commit at place `ord` in the statement. */
type Column = readonly [type: string, value: (p: AdvanceParams, ord: number) => unknown];

const holding = (p: AdvanceParams) => (p.continuation.kind === 'hold' ? p.continuation : undefined);

/**
 * A commit as a row of the statement's input: every value a result commit sends, in the order
 * the statements list them. One run's commit sends its row as parameters, a group one jsonb
 * parameter of rows: a column added here reaches both.
 */
export const COLUMNS = {
  /** The row's place in the statement: its result row says which commit it answers. */
  ord: ['int', (_, ord) => ord],
  run_id: ['uuid', (p) => p.lease.runId],
  fencing_token: ['bigint', (p) => p.lease.fencingToken],
  worker_id: ['text', (p) => p.lease.workerId],
  lease_ms: ['double precision', (p) => p.lease.leaseMs],
  /** The run's step before this commit: the step's, or the first carried step's. */
  from_position: ['int', (p) => p.carry?.steps[0].step.position ?? p.step.position],
  to_position: ['int', (p) => p.step.position + 1],
  workflow_name: ['text', (p) => p.workflowName],
  workflow_version: ['int', (p) => p.workflowVersion],
  step_name: ['text', (p) => p.step.name],
  step_kind: ['text', (p) => p.step.kind],
  /** JSON text (NULL when skipped), so that a JSON `null` output stays a jsonb null. */
  output: ['text', (p) => (p.skipped === true ? null : JSON.stringify(p.output))],
  skipped: ['boolean', (p) => p.skipped === true],
  /** The worker's attempt (NULL: the reconciler's commit). */
  attempt: ['int', (p) => p.attempt ?? null],
  result_attempt: ['int', (p) => p.resultAttempt],
  target: ['text', (p) => targetOf(p.continuation)],
  next_step: ['text', (p) => holding(p)?.nextStep ?? null],
  run_output: ['text', (p) => (p.continuation.kind === 'complete' ? JSON.stringify(p.continuation.runOutput) : null)],
  effect_mode: ['text', (p) => p.effect?.mode ?? null],
  effect_key: ['text', (p) => p.effect?.key ?? null],
  effect_attempt: ['int', ({ effect: e }) => (e === undefined || e.mode === 'reference' ? null : e.attempt)],
  request_hash: ['text', ({ effect: e }) => (e?.mode === 'insert-recorded' ? e.requestHash : null)],
  resolution: ['text', ({ effect: e }) => (e?.mode === 'record-intent' ? (e.resolution ?? null) : null)],
  intent_key: ['text', (p) => holding(p)?.intent?.key ?? null],
  intent_request_hash: ['text', (p) => holding(p)?.intent?.requestHash ?? null],
  intent_horizon_ms: ['double precision', (p) => holding(p)?.intent?.horizonMs ?? null],
} as const satisfies Record<string, Column>;

export type ColumnName = keyof typeof COLUMNS;

const ALL_COLUMNS = Object.keys(COLUMNS) as readonly ColumnName[];
const INTENT_COLUMNS: readonly ColumnName[] = ['intent_key', 'intent_request_hash', 'intent_horizon_ms'];
const NO_INTENT_COLUMNS = ALL_COLUMNS.filter((c) => !INTENT_COLUMNS.includes(c));

/** The columns a shape's statement sends: the next step's intent's only where it writes one. */
export function columnsOf(shape: CommitShape): readonly ColumnName[] {
  return shape.nextIntent ? ALL_COLUMNS : NO_INTENT_COLUMNS;
}

/** A column list's values and `"name":` texts, looked up once per list rather than per row. */
interface ColumnPlan {
  readonly values: ReadonlyArray<Column[1]>;
  readonly jsonNames: readonly string[];
}

const planOf = (columns: readonly ColumnName[]): ColumnPlan => ({
  values: columns.map((c) => COLUMNS[c][1]),
  jsonNames: columns.map((c, i) => `${i === 0 ? '' : ','}${JSON.stringify(c)}:`),
});

/** The plans of the lists {@link columnsOf} gives (any other list gets its own). */
const PLANS = new Map([ALL_COLUMNS, NO_INTENT_COLUMNS].map((list) => [list, planOf(list)]));

/**
 * `p`'s row, of `columns`, as JSON text (a group's row: one object of its jsonb parameter).
 * Written value by value: an object built per row and stringified cost a group commit twice
 * the CPU of building its statement otherwise (bench: worker CPU per step).
 */
export function rowJson(p: AdvanceParams, ord: number, columns: readonly ColumnName[]): string {
  const { values, jsonNames } = PLANS.get(columns) ?? planOf(columns);
  let json = '{';
  for (let i = 0; i < values.length; i += 1) {
    const value = values[i]!(p, ord);
    json += jsonNames[i]! + (value === null || value === undefined ? 'null' : JSON.stringify(value));
  }
  return `${json}}`;
}

/** `p`'s row, of `columns`, as values in their order (one run's commit: its parameters). */
export function valuesOf(p: AdvanceParams, ord: number, columns: readonly ColumnName[]): unknown[] {
  const { values } = PLANS.get(columns) ?? planOf(columns);
  const row = new Array<unknown>(values.length);
  for (let i = 0; i < values.length; i += 1) row[i] = values[i]!(p, ord);
  return row;
}

/** Both statements' shapes: by row source and shape, and per fused claim (registry, limit, lease, worker). */
const COMMIT_SHAPES = new Shapes();

export function commitShapeSlot(
  source: 'one' | 'group',
  shape: CommitShape,
  claimNext: FusedClaim | undefined,
): ShapeSlot {
  const key = [
    source,
    shape.targets.join(','),
    shape.effects.join(','),
    shape.attempt,
    shape.keepsError ? 'keeps-error' : '',
    shape.nextIntent ? 'next-intent' : '',
  ].join('|');
  return claimNext === undefined
    ? COMMIT_SHAPES.for(key)
    : COMMIT_SHAPES.for(`${key}|${claimOptionsKey(claimNext.options)}`, claimNext.registry);
}

/** What a fused claim writes, asserted at every statement: its parts assert it only when first built. */
export function assertFusedClaim(): void {
  assertRunTransition('pending', 'running');
  assertRunTransition('waiting', 'running');
  assertAttemptTransition('none', 'running');
}

/** A fused claim's CTEs and rows, reported on row `ord`: the commit whose completion frees the slot. */
export interface Fused {
  readonly parts: ClaimParts;
  readonly ord: unknown;
}

/**
 * One run's fused claim, guarded by its commit being fenced in (`FUSED_CLAIM`): built once per
 * registry and options, even for a carrying commit, whose statement is built in full.
 */
export function oneRunFused(claimNext: FusedClaim | undefined, ord: unknown): Fused | undefined {
  return claimNext === undefined
    ? undefined
    : { parts: reusedClaimParts(claimNext.registry, claimNext.options, FUSED_CLAIM), ord };
}

/** A group's fused claim, guarded by the run of row `ord` being fenced in (built once per shape). */
export function groupFused(claimNext: FusedClaim | undefined, ord: unknown): Fused | undefined {
  if (claimNext === undefined) return undefined;
  const guard = sql`EXISTS (SELECT 1 FROM fenced WHERE ord = ${ord})`;
  return {
    parts: claimParts(claimNext.registry, claimNext.options, { prefix: 'fused_', guard, takeovers: false }),
    ord,
  };
}

/**
 * `then` per target as one expression: that target's where every row has it, else a CASE on the
 * row's target (`otherwise` for a target without one).
 */
function perTarget(
  shape: CommitShape,
  then: Partial<Record<CommitTarget, RawBuilder<unknown>>>,
  otherwise: RawBuilder<unknown>,
): RawBuilder<unknown> {
  const [only, ...more] = shape.targets;
  if (more.length === 0) return then[only!] ?? otherwise;
  const branches = shape.targets.filter((t) => then[t] !== undefined).map((t) => sql`WHEN ${lit(t)} THEN ${then[t]}`);
  return branches.length === 0 ? otherwise : sql`CASE i.target ${sql.join(branches, sql` `)} ELSE ${otherwise} END`;
}

/** `i.<column> = 'value'` where the shape's rows may differ on it; `undefined` where every row has it. */
function rowsWhere(
  options: readonly string[],
  column: 'target' | 'effect_mode',
  value: string,
): RawBuilder<unknown> | undefined {
  return options.length === 1 ? undefined : sql`i.${sql.raw(column)} = ${lit(value)}`;
}

/** ` WHERE a AND b` of the conditions given, nothing if none. */
function where(...conditions: ReadonlyArray<RawBuilder<unknown> | undefined>): RawBuilder<unknown> {
  const given = conditions.filter((c) => c !== undefined);
  return given.length === 0
    ? sql``
    : sql`
       WHERE ${sql.join(
         given,
         sql`
         AND `,
       )}`;
}

/** The input's columns, a few to a line. */
export function listed(items: readonly RawBuilder<unknown>[]): RawBuilder<unknown> {
  const lines: RawBuilder<unknown>[] = [];
  for (let i = 0; i < items.length; i += 5) lines.push(sql.join(items.slice(i, i + 5), sql`, `));
  return sql.join(
    lines,
    sql`,
        `,
  );
}

const NULL = sql`NULL`;
const NOW = sql`statement_timestamp()`;

/** What each target sets on the run, besides its step, `updated_at` and `error`. */
const RUN_SETS: Readonly<Record<CommitTarget, Readonly<Record<string, RawBuilder<unknown>>>>> = {
  running: { status: lit('running'), lease_expires_at: sql`${NOW} + i.lease_ms * interval '1 millisecond'` },
  pending: { status: lit('pending'), lease_owner: NULL, lease_expires_at: NULL, run_after: NOW },
  completed: {
    status: lit('completed'),
    lease_owner: NULL,
    lease_expires_at: NULL,
    finished_at: NOW,
    output: sql`i.run_output::jsonb`,
  },
  compensated: {
    status: lit('compensated'),
    lease_owner: NULL,
    lease_expires_at: NULL,
    finished_at: NOW,
    output: sql`i.run_output::jsonb`,
  },
};

/** The run's new columns for the shape's targets: each column a target sets, the others' rows keeping it. */
function runSet(shape: CommitShape): RawBuilder<unknown> {
  const columns = [...new Set(shape.targets.flatMap((t) => Object.keys(RUN_SETS[t])))];
  return sql.join(
    columns.map((column) => {
      const then = Object.fromEntries(
        shape.targets.flatMap((t) => (RUN_SETS[t][column] === undefined ? [] : [[t, RUN_SETS[t][column]]])),
      );
      return sql`${sql.raw(column)} = ${perTarget(shape, then, sql.raw(`r.${column}`))}`;
    }),
    sql`,
             `,
  );
}

/**
 * A commit's rows: one run's parameters (`one`), or a group's `jsonb_to_recordset`. One run's
 * `input` is NOT MATERIALIZED: PostgreSQL then pulls the parameters up into every write that
 * reads them, so the run, its attempt and its ledger row are found by their keys (`id = $2`)
 * in a generic plan too. Materialized, `input` was a one-row CTE scan the planner joined by its
 * estimates: the plan a connection keeps once its statement turns generic (after five runs)
 * seq-scanned `step_effect` for the step's ledger row, estimated when the tables were small
 * (tests/runtime/commit-generic-plan.test.ts).
 */
export interface CommitInput {
  readonly source: 'one' | 'group';
  readonly rows: RawBuilder<unknown>;
}

/**
 * What a transactional step's commit (`fill-recorded`, inside the step's transaction, never in a
 * group) fails with when it is not fenced, instead of answering `fenced = false`: its transaction
 * is then aborted, and the COMMIT sent after it — pipelined behind it, without waiting for its
 * answer (worker/executors/step-transaction.ts) — rolls back. Otherwise a COMMIT already on its way
 * would make the handler's writes and the ledger row it opened (`recorded`, no effect yet) durable
 * without the run moving on. A cast of this text to int raises, naming it; the CASE reads the
 * statement's own `fenced` rows, so the planner cannot fold the cast away or raise it early.
 */
export const UNFENCED_STEP_COMMIT = 'ledgerflow: the step commit found its run moved on (fencing token or status)';

/** Whether `error` is the failure of a transactional step's commit that was not fenced ({@link UNFENCED_STEP_COMMIT}). */
export function isUnfencedStepCommit(error: unknown): boolean {
  return error instanceof Error && error.message.includes(UNFENCED_STEP_COMMIT);
}

/**
 * The text of both statements: `input` the rows, `shape` what they may be. Every value is a
 * column of `input`.
 */
export function commitStatement(
  shape: CommitShape,
  input: CommitInput,
  fused: Fused | undefined,
  carried?: CarryValues,
): RawBuilder<AdvanceRow> {
  // A write's rows: each run's input row, where its fenced UPDATE moved it.
  const own = sql`fenced f JOIN input i ON i.ord = f.ord`;
  // The step's ledger row, seen in the statement's snapshot (never the row this statement inserts).
  const hasEffect = sql`EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = i.run_id AND e.step_name = i.step_name)`;
  const inserts = shape.effects.includes('insert-recorded');
  const insertedBy = rowsWhere(shape.effects, 'effect_mode', 'insert-recorded');
  const holds = shape.targets.includes('running');
  const ctes: RawBuilder<unknown>[] = [];
  if (inserts) {
    ctes.push(sql`,
    inserted_effect AS (
      INSERT INTO ledgerflow.step_effect
             (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
      SELECT i.run_id, i.step_name, i.effect_key, i.output::jsonb, 'recorded', 'transactional', i.request_hash,
             i.effect_attempt, i.fencing_token, ${NOW}
        FROM ${own}${where(insertedBy)}
      RETURNING 1
    )`);
  }
  // An intent of this step recorded, or the row this transaction inserted (openingStatement) filled in.
  for (const [mode, name, from] of [
    ['record-intent', 'recorded_intent', 'intent'],
    ['fill-recorded', 'filled_effect', 'recorded'],
  ] as const) {
    if (!shape.effects.includes(mode)) continue;
    ctes.push(sql`,
    ${sql.raw(name)} AS (
      UPDATE ledgerflow.step_effect e
         SET status = 'recorded', effect = i.output::jsonb, recorded_at = COALESCE(e.recorded_at, ${NOW}),
             resolution = COALESCE(i.resolution, e.resolution)
        FROM ${own}${where(
          rowsWhere(shape.effects, 'effect_mode', mode),
          sql`e.workflow_id = i.run_id AND e.step_name = i.step_name AND e.idempotency_key = i.effect_key AND e.status = ${lit(from)} AND e.attempt = i.effect_attempt`,
        )}
      RETURNING 1
    )`);
  }
  if (shape.attempt === 'close') {
    ctes.push(sql`,
    finished AS (
      UPDATE ledgerflow.step_attempt a SET status = 'succeeded', finished_at = ${NOW}
        FROM ${own}
       WHERE a.run_id = i.run_id AND a.step_name = i.step_name AND a.attempt = i.attempt AND a.status = 'running'
      RETURNING 1
    )`);
  }
  if (shape.attempt === 'carried') {
    if (carried === undefined) throw new TypeError('advanceRun: a carrying commit without its carry.');
    ctes.push(sql`${carryCtes(carried)},
    finished AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT i.run_id, i.step_name, i.attempt, 'succeeded', i.fencing_token, i.worker_id, ${carryingAttemptStart(carried)}, ${NOW}
        FROM ${own}
      RETURNING 1
    )`);
  }
  if (holds) {
    ctes.push(sql`,
    next AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT i.run_id, i.next_step,
             1 + COALESCE((SELECT max(a.attempt) FROM ledgerflow.step_attempt a
                            WHERE a.run_id = i.run_id AND a.step_name = i.next_step), 0),
             'running', i.fencing_token, i.worker_id, ${NOW}
        FROM ${own}${where(rowsWhere(shape.targets, 'target', 'running'))}
      RETURNING run_id, attempt
    )`);
  }
  if (shape.nextIntent) {
    // The next step's intent (NextIntent): after its attempt (`next`), unless the step has a ledger
    // row already or the run is past its deadline (the driver then cancels it instead).
    ctes.push(sql`,
    next_intent AS (
      INSERT INTO ledgerflow.step_effect
             (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token,
              intent_at, reconcile_after)
      SELECT i.run_id, i.next_step, i.intent_key, 'null'::jsonb, 'intent', 'external', i.intent_request_hash,
             n.attempt, i.fencing_token, ${NOW}, ${NOW} + i.intent_horizon_ms * interval '1 millisecond'
        FROM ${own} JOIN next n ON n.run_id = i.run_id
       WHERE i.intent_key IS NOT NULL AND f.overdue IS NOT TRUE
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = i.run_id AND e.step_name = i.next_step)
      ON CONFLICT DO NOTHING
      RETURNING workflow_id
    )`);
  }
  if (fused !== undefined) ctes.push(sql`, ${fused.parts.ctes}`);
  const overdue = perTarget(shape, { running: sql`r.deadline_at <= ${NOW}` }, sql`NULL::boolean`);
  const effectExists = inserts
    ? insertedBy === undefined
      ? hasEffect
      : sql`${insertedBy} AND ${hasEffect}`
    : sql`false`;
  return prepared(sql<AdvanceRow>`
    WITH input AS ${input.source === 'one' ? sql`NOT MATERIALIZED ` : sql``}(
      ${input.rows}
    ),
    fenced AS (
      UPDATE ledgerflow.workflow_run r
         SET current_step = i.to_position, updated_at = ${NOW}${
           // A compensation keeps the error that made the run compensate.
           shape.keepsError ? sql`` : sql`, error = NULL`
         }${carried === undefined ? sql`` : sql`, ${carriedRunCreation(carried)}`},
             ${runSet(shape)}
        FROM input i
       WHERE r.id = i.run_id AND r.fencing_token = i.fencing_token AND r.status = 'running' AND r.current_step = i.from_position${
         !inserts
           ? sql``
           : insertedBy === undefined
             ? sql`
         AND NOT ${hasEffect}`
             : sql`
         AND (i.effect_mode IS DISTINCT FROM 'insert-recorded' OR NOT ${hasEffect})`
       }
      RETURNING i.ord, r.id, ${overdue} AS overdue
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status, skipped)
      SELECT i.run_id, i.workflow_name, i.workflow_version, i.step_name, i.step_kind, i.output::jsonb,
             i.result_attempt, i.effect_key, CASE WHEN i.effect_mode IS NOT NULL THEN 'recorded' END, i.skipped
        FROM ${own}
      RETURNING 1
    )${sql.join(ctes, sql``)}
    SELECT i.ord, f.ord IS NOT NULL AS fenced, ${holds ? sql`n.attempt` : sql`NULL::int`} AS next_attempt, f.overdue,
           ${effectExists} AS effect_exists,
           ${
             fused === undefined
               ? sql`NULL::jsonb`
               : sql`CASE WHEN i.ord = ${fused.ord} THEN (SELECT COALESCE(jsonb_agg(c), '[]'::jsonb) FROM (${fused.parts.select}) c) END`
           } AS claimed${
             shape.nextIntent
               ? sql`,
           EXISTS (SELECT 1 FROM next_intent ni WHERE ni.workflow_id = i.run_id) AS intent_opened`
               : sql``
           }${
             shape.effects.includes('fill-recorded')
               ? sql`,
           (CASE WHEN f.ord IS NOT NULL THEN '0' ELSE ${sql.lit(UNFENCED_STEP_COMMIT)} END)::int AS unfenced`
               : sql``
           }
      FROM input i
      LEFT JOIN fenced f ON f.ord = i.ord${
        holds
          ? sql`
      LEFT JOIN next n ON n.run_id = i.run_id`
          : sql``
      }`);
}
