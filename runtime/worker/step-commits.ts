import { sql, type Kysely, type RawBuilder } from 'kysely';
import { isEffectKind } from '../../dsl/step-kind.js';
import type { StepDefinition } from '../../dsl/workflow.js';
import { LeaseLostError } from '../errors.js';
import { prepared } from '../store/prepared.js';
import { shapeOf, Shapes, type ShapeSlot } from '../store/statement-shapes.js';
import type { Json, LedgerflowDatabase, RunStatus } from '../store/tables.js';
import { carryCtes, carriedRunCreation, carryingAttemptStart, type Carry } from './carried-prefix.js';
import { claimOptionsKey, claimParts, FUSED_CLAIM, reusedClaimParts, type ClaimOptions, type ClaimParts } from './claim.js';
import { toLeasedRun, type LeasedRun, type LeasedRunRow } from '../store/leased-run.js';
import { millis } from '../store/millis.js';
import type { Lease } from './lease.js';
import type { WorkflowRegistry } from './registry.js';
import { reconcileBackoffMs } from './retry.js';
import { assertAttemptTransition, assertEffectTransition, assertRunTransition } from '../store/state-machines.js';
import { RUNS_CHANNEL } from '../store/channels.js';
import { recordableText } from './step-errors.js';

/*
 * Every write that changes a run. Each is fenced: it changes the run only
 * `WHERE id = $run AND fencing_token = $token AND status = 'running'`, and every other write of
 * the commit is conditioned on that row having been changed, so a worker whose token moved on
 * (a zombie) changes nothing. Where possible a commit is ONE statement (data-modifying CTEs):
 * one round trip, atomic without BEGIN/COMMIT.
 */

/** What happens to the run after its step is committed. */
export type Continuation =
  /**
   * Keep the lease and open the next step's attempt in the same commit; with `intent`, also the
   * next (`external`) step's intent (see {@link NextIntent}).
   */
  | { readonly kind: 'hold'; readonly nextStep: string; readonly intent?: NextIntent }
  /** Give the run back as `pending`, due now (worker stopping; reconciler). */
  | { readonly kind: 'release' }
  /**
   * That was the last step: `completed`, with the outputs of all steps as the run's output.
   * With `claimNext`, the same commit also claims pending runs for the slot it frees (fused
   * claim: one commit instead of two per run while there is a backlog).
   */
  | {
      readonly kind: 'complete';
      readonly runOutput: Json;
      readonly claimNext?: FusedClaim;
      /** The last compensation of a run being compensated: the run ends `compensated` instead. */
      readonly compensated?: true;
    };

/**
 * The intent of the next step, an `external` one, written by the commit that moves the run to it
 * instead of by an intent commit of its own: one commit and one round trip fewer per external
 * step that follows another step's commit. Exactly the row the intent commit writes
 * (`openIntentStatement`): status `intent`, this key and request hash, the next step's new
 * attempt, the lease's token, `intent_at` the statement's time and the horizon `leaseMs +
 * performTimeoutMs` after it. Written only if the step has no ledger row yet and the run is not
 * past its deadline; the commit sets `opened` (fenced and written), and only then does the
 * attempt perform without an intent commit — otherwise it opens its intent as always.
 */
export interface NextIntent {
  readonly key: string;
  readonly requestHash: string;
  /** `leaseMs + performTimeoutMs` of the next step: where its horizon lies after the commit. */
  readonly horizonMs: number;
  /** Set by {@link advanceRun} once the commit's statement wrote the intent (final at the transaction's COMMIT). */
  opened?: boolean;
}

/** A claim that rides on a step's completion commit; see {@link advanceRun}. */
export interface FusedClaim {
  readonly registry: WorkflowRegistry;
  readonly options: ClaimOptions;
}

export interface AdvanceParams {
  readonly lease: Lease;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly step: StepDefinition;
  /** The worker's `running` attempt to close as succeeded; `undefined` for the reconciler. */
  readonly attempt: number | undefined;
  /** The attempt the result is attributed to (the performing attempt for a reconciled effect). */
  readonly resultAttempt: number;
  readonly output: Json;
  /** Ledger row the result points at (effect kinds only), and what this commit does to it. */
  readonly effect?: ResultEffect;
  /** The step's condition said no: recorded as skipped, output NULL, no ledger row whatever the kind. */
  readonly skipped?: boolean;
  readonly continuation: Continuation;
  /**
   * Plain steps before this one whose results this commit writes first (see carried-prefix.ts):
   * the run moves from the first of them, and this step's attempt, which no commit opened, is
   * inserted finished.
   */
  readonly carry?: Carry;
}

/** What a result commit needs from the attempt that makes it (a `StepExecution` has all of it). */
export interface ResultCommitSource {
  readonly lease: Lease;
  readonly run: { readonly workflowName: string; readonly workflowVersion: number };
  readonly step: StepDefinition;
  /** The attempt to close as succeeded. */
  readonly attempt: number;
  /** What the commit does with the run, given the output (`undefined`: skipped); asked once per result commit. */
  continuation(output: Json | undefined): Continuation;
  /** Carried steps the attempt's first commit writes; none once a fenced commit wrote them. */
  readonly carry?: Carry | undefined;
}

/**
 * The {@link AdvanceParams} of an attempt's result commit, so that each executor states only
 * what differs (the output and the ledger effect): the attempt's lease, run, step and attempt,
 * the result attributed to the attempt that performed the effect — the intent's writer for
 * `record-intent`, this attempt otherwise — and the continuation for `output`, asked for once
 * here (it may reserve a fused claim): read it back as `.continuation`.
 */
export function resultCommit(s: ResultCommitSource, output: Json, effect?: ResultEffect): AdvanceParams {
  return {
    lease: s.lease,
    workflowName: s.run.workflowName,
    workflowVersion: s.run.workflowVersion,
    step: s.step,
    attempt: s.attempt,
    resultAttempt: effect?.mode === 'record-intent' ? effect.attempt : s.attempt,
    output,
    ...(effect === undefined ? {} : { effect }),
    continuation: s.continuation(output),
    ...(s.carry !== undefined && !s.carry.written ? { carry: s.carry } : {}),
  };
}

/** The ledger row a step's result points at, and what the result commit does to it. */
export type ResultEffect =
  /** The row is already `recorded` (its output is being reused): only referenced. */
  | { readonly key: string; readonly mode: 'reference' }
  /**
   * A `transactional` step whose handler sent nothing through `ctx.tx`: the row is inserted,
   * `recorded` with the output, in this same statement — and the run moves only if the step has
   * no ledger row yet; if it has one, nothing changes and {@link AdvanceResult.effectExists} says so.
   */
  | { readonly key: string; readonly mode: 'insert-recorded'; readonly attempt: number; readonly requestHash: string }
  /** A `transactional` step's row, inserted `recorded` by this same transaction, gets its output. */
  | { readonly key: string; readonly mode: 'fill-recorded'; readonly attempt: number }
  /** An `external` intent written by `attempt` becomes `recorded` (perform returned, or reconcile found it). */
  | { readonly key: string; readonly mode: 'record-intent'; readonly attempt: number; readonly resolution?: string };

export interface AdvanceResult {
  readonly fenced: boolean;
  /** The next step's attempt, opened by this commit (`hold` only). */
  readonly nextAttempt: number | null;
  /** Runs the fused claim took (`complete` with `claimNext` only; otherwise `undefined`). */
  readonly claimed: readonly LeasedRun[] | undefined;
  /** With `insert-recorded` only: the step already had a ledger row, so this statement changed nothing. */
  readonly effectExists?: boolean;
  /** `hold` only: the run's deadline has passed; the driver cancels it instead of running the next step. */
  readonly overdue: boolean;
}

const lit = (value: string): RawBuilder<unknown> => sql.lit(value);

/**
 * Step result + attempt succeeded + ledger row (recorded) + run transition, in ONE statement.
 * The step_result foreign key makes the database itself refuse an effect step's result without
 * a `recorded` ledger row under its key. A fused claim (`complete` with `claimNext`) adds the
 * claim's CTEs (prefixed `fused_`, pending runs only) guarded by this commit being fenced in:
 * a zombie's rolled-back completion claims nothing.
 */
export async function advanceRun(db: Kysely<LedgerflowDatabase>, p: AdvanceParams): Promise<AdvanceResult> {
  const { rows } = await advanceRunStatement(p).execute(db);
  const result = toAdvanceResult(p, rows[0]);
  // Inside a step's transaction this is only final at its COMMIT: that commit carries nothing (see StepTransaction).
  if (result.fenced && p.carry !== undefined) p.carry.written = true;
  if (p.continuation.kind === 'hold' && p.continuation.intent !== undefined) {
    p.continuation.intent.opened = result.fenced && rows[0]?.intent_opened === true;
  }
  return result;
}

function toAdvanceResult(p: AdvanceParams, row: AdvanceRow | undefined): AdvanceResult {
  const fused = p.continuation.kind === 'complete' && p.continuation.claimNext !== undefined;
  return {
    fenced: row?.fenced === true,
    nextAttempt: row?.next_attempt ?? null,
    claimed: fused ? (row?.claimed ?? []).map(toLeasedRun) : undefined,
    ...(p.effect?.mode === 'insert-recorded' ? { effectExists: row?.effect_exists === true } : {}),
    overdue: row?.overdue === true,
  };
}

/** The row {@link advanceRunStatement} returns, one per commit ({@link advanceRunsStatement}). */
export interface AdvanceRow {
  /** The commit's place in the statement. */
  ord: number;
  fenced: boolean;
  next_attempt: number | null;
  claimed: LeasedRunRow[] | null;
  effect_exists: boolean;
  /** NULL unless the commit holds the run. */
  overdue: boolean | null;
  /** `hold` with a {@link NextIntent} only: the statement wrote it. */
  intent_opened?: boolean;
}

/**
 * The statement of {@link advanceRun}; checks the transitions it makes before building it. `now`
 * (`performance.now()`) dates carried attempts: worker-measured durations before the statement's time.
 * A group of one ({@link commitStatement}): its row comes as parameters.
 */
export function advanceRunStatement(p: AdvanceParams, now: number = performance.now()): RawBuilder<AdvanceRow> {
  checkAdvance(p);
  const shape = commitShapeOf(p);
  const claimNext = p.continuation.kind === 'complete' ? p.continuation.claimNext : undefined;
  if (claimNext !== undefined) assertFusedClaim();
  const columns = columnsOf(shape);
  const oneRow = (values: readonly unknown[]) => sql`SELECT ${listed(columns.map((c, i) => sql`${values[i]}::${sql.raw(COLUMNS[c][0])} AS ${sql.raw(c)}`))}`;
  const row = rowOf(p, 0, columns);
  const values = columns.map((c) => row[c]);
  // A commit that carries earlier steps dates them from `now`: built in full.
  if (p.carry !== undefined) {
    const carried = { lease: p.lease, workflow: { name: p.workflowName, version: p.workflowVersion }, carry: p.carry, now };
    return commitStatement(shape, oneRow(values), oneRunFused(claimNext, 0), carried);
  }
  // Otherwise built and compiled once per shape; then only the values are filled in (store/statement-shapes.ts).
  return shapeOf(commitShapeSlot('one', shape, claimNext), [...values, 0], (...slots) =>
    commitStatement(shape, oneRow(slots.slice(0, -1)), oneRunFused(claimNext, slots.at(-1))),
  );
}

/**
 * Several runs' result commits in ONE statement (group commit, see `commit-queue.ts`): the
 * same writes as {@link advanceRunStatement}, one row of input per run, each row's writes
 * joined to ITS run's fenced UPDATE — a run whose token moved on (a zombie) or whose step
 * already has a ledger row (`insert-recorded`) changes nothing, and the others commit. Returns
 * one result per commit, in the order given. At most one commit may carry a fused claim; it is
 * guarded by that commit's own run being fenced in. Kinds it takes: {@link isBatchable}.
 */
export async function advanceRuns(db: Kysely<LedgerflowDatabase>, ps: readonly AdvanceParams[]): Promise<AdvanceResult[]> {
  const { rows } = await advanceRunsStatement(ps).execute(db);
  // By the row's place (no ORDER BY: a sort would cost every commit, a group of one included).
  const byOrd = new Map(rows.map((row) => [row.ord, row]));
  return ps.map((p, i) => toAdvanceResult(p, byOrd.get(i)));
}

/**
 * Whether a result commit can go in a group ({@link advanceRunsStatement}): its shape is one the
 * group statement's ({@link GROUP_SHAPE}) holds.
 */
export function isBatchable(p: AdvanceParams): boolean {
  const s = commitShapeOf(p);
  const g = GROUP_SHAPE;
  return (
    s.targets.every((t) => g.targets.includes(t)) &&
    s.effects.every((e) => g.effects.includes(e)) &&
    s.attempt === g.attempt &&
    s.keepsError === g.keepsError &&
    (!s.nextIntent || g.nextIntent)
  );
}

/** The statement of {@link advanceRuns}; checks every commit's transitions before building it. */
export function advanceRunsStatement(ps: readonly AdvanceParams[]): RawBuilder<AdvanceRow> {
  let fusedOrd: number | undefined;
  let claimNext: FusedClaim | undefined;
  const seen = new Set<string>();
  const columns = columnsOf(GROUP_SHAPE);
  const rows = ps.map((p, ord) => {
    checkAdvance(p);
    if (!isBatchable(p)) throw new TypeError(`advanceRuns: the ${p.effect?.mode ?? 'worker-less'} commit of step "${p.step.name}" cannot be grouped.`);
    if (seen.has(p.lease.runId)) throw new TypeError(`advanceRuns: run ${p.lease.runId} has two commits in one group.`);
    seen.add(p.lease.runId);
    const c = p.continuation;
    if (c.kind === 'complete' && c.claimNext !== undefined) {
      if (claimNext !== undefined) throw new TypeError('advanceRuns: at most one commit of a group may carry a fused claim.');
      claimNext = c.claimNext;
      fusedOrd = ord;
    }
    return rowOf(p, ord, columns);
  });
  if (claimNext !== undefined) assertFusedClaim();
  // Built and compiled once per shape (with or without this worker's fused claim); then only the
  // rows (one jsonb parameter) and the fused row's ord are filled in (store/statement-shapes.ts).
  return shapeOf(commitShapeSlot('group', GROUP_SHAPE, claimNext), [JSON.stringify(rows), fusedOrd ?? null] as const, (json, ord) =>
    commitStatement(
      GROUP_SHAPE,
      sql`SELECT * FROM jsonb_to_recordset(${json}::jsonb) AS i(
        ${listed(columns.map((c) => sql.raw(`${c} ${COLUMNS[c][0]}`)))})`,
      groupFused(claimNext, ord),
    ),
  );
}

/*
 * ONE definition of a result commit's writes, for one run and for a group alike: a commit is a
 * set of rows (`input`, one per run: {@link COLUMNS}), and every write joins to its row of
 * `fenced` — the runs the fenced UPDATE moved. One run's commit is a group of one whose row comes
 * as parameters ({@link advanceRunStatement}); a group's rows come as one jsonb parameter
 * ({@link advanceRunsStatement}). What the rows may differ on is the statement's shape
 * ({@link CommitShape}): where every row is alike (one run), each write is written for that case
 * alone; where they may differ (a group), a write tests each row's column (`i.target`,
 * `i.effect_mode`). A column, a write or a target added here reaches both statements.
 */

/** The run status a commit moves its run to. */
type CommitTarget = 'running' | 'pending' | 'completed' | 'compensated';

/** What a commit does to its step's ledger row (`none`: the step has none). */
type EffectMode = ResultEffect['mode'] | 'none';

/** What a commit statement is written for: what its rows may be, decided per statement and not per value. */
interface CommitShape {
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
const GROUP_SHAPE: CommitShape = {
  targets: ['running', 'pending', 'completed'],
  effects: ['none', 'reference', 'insert-recorded', 'record-intent'],
  attempt: 'close',
  keepsError: false,
  nextIntent: false,
};

function commitShapeOf(p: AdvanceParams): CommitShape {
  const c = p.continuation;
  return {
    targets: [targetOf(c)],
    effects: [p.effect?.mode ?? 'none'],
    attempt: p.attempt === undefined ? 'none' : p.carry === undefined ? 'close' : 'carried',
    keepsError: p.step.compensates !== undefined,
    nextIntent: c.kind === 'hold' && c.intent !== undefined,
  };
}

function targetOf(c: Continuation): CommitTarget {
  return c.kind === 'hold' ? 'running' : c.kind === 'release' ? 'pending' : c.compensated === true ? 'compensated' : 'completed';
}

/** A column of a commit's row: its SQL type, and its value for a commit at place `ord` in the statement. */
type Column = readonly [type: string, value: (p: AdvanceParams, ord: number) => unknown];

const holding = (p: AdvanceParams) => (p.continuation.kind === 'hold' ? p.continuation : undefined);

/**
 * A commit as a row of the statement's input: every value a result commit sends, in the order
 * the statements list them. One run's commit sends its row as parameters, a group one jsonb
 * parameter of rows: a column added here reaches both.
 */
const COLUMNS = {
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

type ColumnName = keyof typeof COLUMNS;

const ALL_COLUMNS = Object.keys(COLUMNS) as readonly ColumnName[];
const INTENT_COLUMNS: readonly ColumnName[] = ['intent_key', 'intent_request_hash', 'intent_horizon_ms'];
const NO_INTENT_COLUMNS = ALL_COLUMNS.filter((c) => !INTENT_COLUMNS.includes(c));

/** The columns a shape's statement sends: the next step's intent's only where it writes one. */
function columnsOf(shape: CommitShape): readonly ColumnName[] {
  return shape.nextIntent ? ALL_COLUMNS : NO_INTENT_COLUMNS;
}

/** `p`'s row, of `columns`. */
function rowOf(p: AdvanceParams, ord: number, columns: readonly ColumnName[]): Record<ColumnName, unknown> {
  return Object.fromEntries(columns.map((c) => [c, COLUMNS[c][1](p, ord)])) as Record<ColumnName, unknown>;
}

/** Both statements' shapes: by row source and shape, and per fused claim (registry, limit, lease, worker). */
const COMMIT_SHAPES = new Shapes();

function commitShapeSlot(source: 'one' | 'group', shape: CommitShape, claimNext: FusedClaim | undefined): ShapeSlot {
  const key = [source, shape.targets.join(','), shape.effects.join(','), shape.attempt, shape.keepsError ? 'keeps-error' : '', shape.nextIntent ? 'next-intent' : ''].join('|');
  return claimNext === undefined ? COMMIT_SHAPES.for(key) : COMMIT_SHAPES.for(`${key}|${claimOptionsKey(claimNext.options)}`, claimNext.registry);
}

/** What a fused claim writes, asserted at every statement: its parts assert it only when first built. */
function assertFusedClaim(): void {
  assertRunTransition('pending', 'running');
  assertRunTransition('waiting', 'running');
  assertAttemptTransition('none', 'running');
}

/** A fused claim's CTEs and rows, reported on row `ord`: the commit whose completion frees the slot. */
interface Fused {
  readonly parts: ClaimParts;
  readonly ord: unknown;
}

/**
 * One run's fused claim, guarded by its commit being fenced in (`FUSED_CLAIM`): built once per
 * registry and options, even for a carrying commit, whose statement is built in full.
 */
function oneRunFused(claimNext: FusedClaim | undefined, ord: unknown): Fused | undefined {
  return claimNext === undefined ? undefined : { parts: reusedClaimParts(claimNext.registry, claimNext.options, FUSED_CLAIM), ord };
}

/** A group's fused claim, guarded by the run of row `ord` being fenced in (built once per shape). */
function groupFused(claimNext: FusedClaim | undefined, ord: unknown): Fused | undefined {
  if (claimNext === undefined) return undefined;
  const guard = sql`EXISTS (SELECT 1 FROM fenced WHERE ord = ${ord})`;
  return { parts: claimParts(claimNext.registry, claimNext.options, { prefix: 'fused_', guard, takeovers: false }), ord };
}

/** Earlier steps the one row's commit carries (carried-prefix.ts): its attempt is inserted finished. */
interface Carried {
  readonly lease: Lease;
  readonly workflow: { readonly name: string; readonly version: number };
  readonly carry: Carry;
  readonly now: number;
}

/**
 * `then` per target as one expression: that target's where every row has it, else a CASE on the
 * row's target (`otherwise` for a target without one).
 */
function perTarget(shape: CommitShape, then: Partial<Record<CommitTarget, RawBuilder<unknown>>>, otherwise: RawBuilder<unknown>): RawBuilder<unknown> {
  const [only, ...more] = shape.targets;
  if (more.length === 0) return then[only!] ?? otherwise;
  const branches = shape.targets.filter((t) => then[t] !== undefined).map((t) => sql`WHEN ${lit(t)} THEN ${then[t]}`);
  return branches.length === 0 ? otherwise : sql`CASE i.target ${sql.join(branches, sql` `)} ELSE ${otherwise} END`;
}

/** `i.<column> = 'value'` where the shape's rows may differ on it; `undefined` where every row has it. */
function rowsWhere(options: readonly string[], column: 'target' | 'effect_mode', value: string): RawBuilder<unknown> | undefined {
  return options.length === 1 ? undefined : sql`i.${sql.raw(column)} = ${lit(value)}`;
}

/** ` WHERE a AND b` of the conditions given, nothing if none. */
function where(...conditions: ReadonlyArray<RawBuilder<unknown> | undefined>): RawBuilder<unknown> {
  const given = conditions.filter((c) => c !== undefined);
  return given.length === 0 ? sql`` : sql`
       WHERE ${sql.join(given, sql`
         AND `)}`;
}

/** The input's columns, a few to a line. */
function listed(items: readonly RawBuilder<unknown>[]): RawBuilder<unknown> {
  const lines: RawBuilder<unknown>[] = [];
  for (let i = 0; i < items.length; i += 5) lines.push(sql.join(items.slice(i, i + 5), sql`, `));
  return sql.join(lines, sql`,
        `);
}

const NULL = sql`NULL`;
const NOW = sql`statement_timestamp()`;

/** What each target sets on the run, besides its step, `updated_at` and `error`. */
const RUN_SETS: Readonly<Record<CommitTarget, Readonly<Record<string, RawBuilder<unknown>>>>> = {
  running: { status: lit('running'), lease_expires_at: sql`${NOW} + i.lease_ms * interval '1 millisecond'` },
  pending: { status: lit('pending'), lease_owner: NULL, lease_expires_at: NULL, run_after: NOW },
  completed: { status: lit('completed'), lease_owner: NULL, lease_expires_at: NULL, finished_at: NOW, output: sql`i.run_output::jsonb` },
  compensated: { status: lit('compensated'), lease_owner: NULL, lease_expires_at: NULL, finished_at: NOW, output: sql`i.run_output::jsonb` },
};

/** The run's new columns for the shape's targets: each column a target sets, the others' rows keeping it. */
function runSet(shape: CommitShape): RawBuilder<unknown> {
  const columns = [...new Set(shape.targets.flatMap((t) => Object.keys(RUN_SETS[t])))];
  return sql.join(
    columns.map((column) => {
      const then = Object.fromEntries(shape.targets.flatMap((t) => (RUN_SETS[t][column] === undefined ? [] : [[t, RUN_SETS[t][column]]])));
      return sql`${sql.raw(column)} = ${perTarget(shape, then, sql.raw(`r.${column}`))}`;
    }),
    sql`,
             `,
  );
}

/**
 * The text of both statements: `input` the rows (a SELECT of one row's parameters, or a
 * `jsonb_to_recordset`), `shape` what they may be. Every value is a column of `input`.
 */
function commitStatement(shape: CommitShape, input: RawBuilder<unknown>, fused: Fused | undefined, carried?: Carried): RawBuilder<AdvanceRow> {
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
  // An intent of this step recorded, or the row this transaction inserted (openTransactionalEffect) filled in.
  for (const [mode, name, from] of [['record-intent', 'recorded_intent', 'intent'], ['fill-recorded', 'filled_effect', 'recorded']] as const) {
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
    const { lease, workflow, carry, now } = carried;
    ctes.push(sql`${carryCtes(lease, workflow, carry, now)},
    finished AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT i.run_id, i.step_name, i.attempt, 'succeeded', i.fencing_token, i.worker_id, ${carryingAttemptStart(carry, now)}, ${NOW}
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
  const effectExists = inserts ? (insertedBy === undefined ? hasEffect : sql`${insertedBy} AND ${hasEffect}`) : sql`false`;
  return prepared(sql<AdvanceRow>`
    WITH input AS (
      ${input}
    ),
    fenced AS (
      UPDATE ledgerflow.workflow_run r
         SET current_step = i.to_position, updated_at = ${NOW}${
           // A compensation keeps the error that made the run compensate.
           shape.keepsError ? sql`` : sql`, error = NULL`
         }${carried === undefined ? sql`` : sql`, ${carriedRunCreation(carried.carry, carried.now)}`},
             ${runSet(shape)}
        FROM input i
       WHERE r.id = i.run_id AND r.fencing_token = i.fencing_token AND r.status = 'running' AND r.current_step = i.from_position${
         !inserts ? sql`` : insertedBy === undefined ? sql`
         AND NOT ${hasEffect}` : sql`
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
             shape.nextIntent ? sql`,
           EXISTS (SELECT 1 FROM next_intent ni WHERE ni.workflow_id = i.run_id) AS intent_opened` : sql``
           }
      FROM input i
      LEFT JOIN fenced f ON f.ord = i.ord${holds ? sql`
      LEFT JOIN next n ON n.run_id = i.run_id` : sql``}`);
}

/** Checks the transitions a result commit makes and that its ledger effect fits the step. */
function checkAdvance(p: AdvanceParams): void {
  const c = p.continuation;
  if ((c.kind === 'complete' && c.compensated === true) !== (c.kind === 'complete' && p.step.compensates !== undefined)) {
    throw new TypeError(`advanceRun: only the last compensation ends a run compensated (step "${p.step.name}").`);
  }
  assertRunTransition('running', targetOf(c));
  if (p.attempt !== undefined) assertAttemptTransition(p.carry === undefined ? 'running' : 'none', 'succeeded');
  if (p.carry !== undefined && p.attempt === undefined) throw new TypeError(`advanceRun: only a worker's attempt carries earlier steps (step "${p.step.name}").`);
  if (p.continuation.kind === 'hold') assertAttemptTransition('none', 'running');
  if (p.continuation.kind === 'hold' && p.continuation.intent !== undefined) assertEffectTransition('none', 'intent');
  const effect = p.effect;
  if (effect?.mode === 'record-intent') assertEffectTransition('intent', 'recorded');
  // fill-recorded completes the row this same transaction inserted (openTransactionalEffect):
  // seen from outside, the commit takes the step's ledger row from none to recorded.
  if (effect?.mode === 'insert-recorded' || effect?.mode === 'fill-recorded') assertEffectTransition('none', 'recorded');
  const needsEffect = isEffectKind(p.step.kind) && p.skipped !== true;
  if ((effect !== undefined) !== needsEffect || (effect?.mode === 'insert-recorded' && p.step.kind !== 'transactional')) {
    throw new TypeError(`advanceRun: ledger effect ${effect?.mode ?? 'none'} does not fit ${p.step.kind} step "${p.step.name}".`);
  }
}

/**
 * Closes the attempt as `abandoned` (it decided nothing about the step) and moves the run on
 * without a result: parked for a human or the reconciler, or rescheduled until an earlier
 * attempt's intent is old enough to reconcile. One fenced statement.
 */
export async function commitYield(db: Kysely<LedgerflowDatabase>, p: YieldParams): Promise<boolean> {
  const { rows } = await commitYieldStatement(p).execute(db);
  return rows[0]?.fenced === true;
}

export interface YieldParams {
  readonly lease: Lease;
  readonly step: StepDefinition;
  readonly attempt: number;
  readonly to:
    | {
        readonly kind: 'park';
        readonly reason: string;
        readonly key: string;
        /** The lookups of the intent so far, this attempt's included: the next one waits `reconcileBackoffMs(lookups)`. */
        readonly lookups: number;
      }
    | { readonly kind: 'reschedule'; readonly until: Date; readonly reason: string }
    | {
        /**
         * A compensation that cannot decide until an earlier step's open intent is settled, and
         * whose lookups so far could not settle it: parked until the reconciler or an operator
         * settles that intent ({@link wakeAwaitingCompensation} wakes it). When the intent is
         * already settled by the time this commits, the run is pending now instead.
         */
        readonly kind: 'await-settlement';
        readonly reason: string;
        /** The compensated step whose intent is open, and that intent's key. */
        readonly awaits: string;
        readonly key: string;
      };
}

/** The statement of {@link commitYield}. */
export function commitYieldStatement(p: YieldParams): RawBuilder<{ fenced: boolean }> {
  const { lease, step } = p;
  if (p.to.kind === 'await-settlement') return awaitSettlementStatement({ ...p, to: p.to });
  const status: RunStatus = p.to.kind === 'park' ? 'needs_reconciliation' : 'pending';
  assertRunTransition('running', status);
  assertAttemptTransition('running', 'abandoned');
  if (p.to.kind === 'park') assertEffectTransition('intent', 'intent');
  const attemptError =
    p.to.kind === 'park'
      ? { name: 'NeedsReconciliation', message: p.to.reason }
      : { name: 'AwaitingIntent', message: p.to.reason };
  const runSet =
    p.to.kind === 'park'
      ? sql`status = 'needs_reconciliation',
            error = ${JSON.stringify({ name: 'NeedsReconciliation', message: p.to.reason, step: step.name, key: p.to.key, exhausted: false })}::jsonb`
      : sql`status = 'pending', run_after = ${p.to.until}::timestamptz`;
  return sql<{ fenced: boolean }>`
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(), ${runSet}
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
      RETURNING id
    ),
    attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = statement_timestamp(), error = ${JSON.stringify(attemptError)}::jsonb,
             next_eligible_at = ${p.to.kind === 'reschedule' ? p.to.until : null}::timestamptz
       WHERE run_id = ${lease.runId} AND step_name = ${step.name} AND attempt = ${p.attempt} AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )${
      p.to.kind === 'park'
        ? sql`,
    asked AS (
      -- This attempt asked the provider and it could not tell: the next lookup waits a backoff.
      UPDATE ledgerflow.step_effect
         SET reconcile_attempts = reconcile_attempts + 1,
             reconcile_after = statement_timestamp() + ${millis(reconcileBackoffMs(p.to.lookups))},
             resolution = ${recordableText(`parked: ${p.to.reason}`)}
       WHERE workflow_id = ${lease.runId} AND step_name = ${step.name} AND idempotency_key = ${p.to.key} AND status = 'intent'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )`
        : sql``
    }
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced`;
}

/**
 * The `await-settlement` yield, ONE statement. It locks the run's row, then the open intent's row
 * without waiting: a settle that holds or has changed that row makes it not open here (the run is
 * then pending now, to decide at once); a settle that comes after waits for this commit, and its
 * wake ({@link wakeAwaitingCompensationStatement}, a statement of its own) then sees the parked
 * run. Locks run row → intent row as an operator's resolve does, and never waits for the second:
 * no deadlock with the reconciler (intent → run). The run's error keeps why it compensates as
 * `cause`, restored when it wakes.
 */
function awaitSettlementStatement(p: YieldParams & { readonly to: Extract<YieldParams['to'], { kind: 'await-settlement' }> }): RawBuilder<{ fenced: boolean }> {
  const { lease, step, to } = p;
  assertRunTransition('running', 'needs_reconciliation');
  assertRunTransition('running', 'pending');
  assertAttemptTransition('running', 'abandoned');
  return sql<{ fenced: boolean }>`
    WITH run_locked AS (
      SELECT id FROM ledgerflow.workflow_run WHERE id = ${lease.runId} FOR UPDATE
    ),
    open_intent AS (
      SELECT 1 FROM run_locked, ledgerflow.step_effect e
       WHERE e.workflow_id = ${lease.runId} AND e.step_name = ${to.awaits} AND e.idempotency_key = ${to.key} AND e.status = 'intent'
         FOR UPDATE OF e SKIP LOCKED
    ),
    held AS (
      SELECT EXISTS (SELECT 1 FROM open_intent) AS open
    ),
    fenced AS (
      UPDATE ledgerflow.workflow_run r
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
             status = CASE WHEN h.open THEN 'needs_reconciliation' ELSE 'pending' END,
             run_after = CASE WHEN h.open THEN r.run_after ELSE statement_timestamp() END,
             error = CASE WHEN h.open
                          THEN jsonb_build_object('name', 'NeedsReconciliation', 'message', ${to.reason}::text, 'step', ${to.awaits}::text,
                                                  'key', ${to.key}::text, 'exhausted', false, 'awaitedBy', ${step.name}::text, 'cause', r.error)
                          ELSE r.error END
        FROM held h
       WHERE r.id = ${lease.runId} AND r.fencing_token = ${lease.fencingToken} AND r.status = 'running'
      RETURNING r.id
    ),
    attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = ${JSON.stringify({ name: 'NeedsReconciliation', message: to.reason })}::jsonb
       WHERE run_id = ${lease.runId} AND step_name = ${step.name} AND attempt = ${p.attempt} AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced`;
}

/**
 * Wakes a compensating run parked (`await-settlement`) on `stepName`'s intent once that intent
 * is settled: pending now, its error back to why it compensates; workers are notified. Run after
 * the settle, as a statement of its own (see {@link awaitSettlementStatement} for why), in the
 * settle's transaction.
 */
export function wakeAwaitingCompensationStatement(runId: string, stepName: string): RawBuilder<{ id: string }> {
  assertRunTransition('needs_reconciliation', 'pending');
  return sql<{ id: string }>`
    WITH woken AS (
      UPDATE ledgerflow.workflow_run
         SET status = 'pending', run_after = statement_timestamp(), updated_at = statement_timestamp(), error = error->'cause'
       WHERE id = ${runId} AND status = 'needs_reconciliation' AND compensation IS NOT NULL
         AND error->>'step' = ${stepName} AND error ? 'awaitedBy'
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = ${runId} AND e.step_name = ${stepName} AND e.status = 'intent')
      RETURNING id
    )
    SELECT id, pg_notify(${RUNS_CHANNEL}, id::text) FROM woken`;
}

export type CommitState = 'committed' | 'not_committed' | 'lost';

/**
 * After a commit whose outcome is unknown: every commit of a step closes its attempt, so the
 * attempt row tells whether it happened. A moved token means someone else owns the run now.
 */
export async function attemptCommitState(
  db: Kysely<LedgerflowDatabase>,
  lease: Lease,
  stepName: string,
  attempt: number,
): Promise<CommitState> {
  const { rows } = await attemptCommitStateStatement(lease, stepName, attempt).execute(db);
  const row = rows[0];
  if (row === undefined || row.fencing_token !== lease.fencingToken) return 'lost';
  return row.attempt_status === 'running' ? 'not_committed' : 'committed';
}

/** The read of {@link attemptCommitState}. */
export function attemptCommitStateStatement(
  lease: Lease,
  stepName: string,
  attempt: number,
): RawBuilder<{ fencing_token: number; attempt_status: string | null }> {
  return sql<{ fencing_token: number; attempt_status: string | null }>`
    SELECT r.fencing_token, a.status AS attempt_status
      FROM ledgerflow.workflow_run r
      LEFT JOIN ledgerflow.step_attempt a ON a.run_id = r.id AND a.step_name = ${stepName} AND a.attempt = ${attempt}
     WHERE r.id = ${lease.runId}`;
}

/** Used where a commit's fenced check found nothing: the run is no longer ours. */
export function leaseLost(lease: Lease, what: string): LeaseLostError {
  return new LeaseLostError(
    `Run ${lease.runId}: fencing token ${lease.fencingToken} is no longer current; ${what} was rolled back.`,
  );
}
