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

/** The row {@link advanceRunStatement} returns. */
export interface AdvanceRow {
  fenced: boolean;
  next_attempt: number | null;
  claimed: LeasedRunRow[] | null;
  effect_exists: boolean;
  overdue: boolean | null;
  /** `hold` with a {@link NextIntent} only: the statement wrote it. */
  intent_opened?: boolean;
}

/**
 * The statement of {@link advanceRun}; checks the transitions it makes before building it. `now`
 * (`performance.now()`) dates carried attempts: worker-measured durations before the statement's time.
 */
export function advanceRunStatement(p: AdvanceParams, now: number = performance.now()): RawBuilder<AdvanceRow> {
  checkAdvance(p);
  const values = advanceValues(p);
  // A commit that carries earlier steps has as many texts as carried steps: built in full.
  if (p.carry !== undefined) return advanceRunText(p, values, now);
  // Otherwise built and compiled once per shape; then only the values are filled in (store/statement-shapes.ts).
  return shapeOf(advanceShape(p), ADVANCE_VALUE_NAMES.map((name) => values[name]), (...slots) =>
    advanceRunText(p, Object.fromEntries(ADVANCE_VALUE_NAMES.map((name, i) => [name, slots[i]])) as unknown as AdvanceValues, now),
  );
}

/** Every value {@link advanceRunStatement} sends: all of it but its shape, which `p` decides. */
interface AdvanceValues {
  readonly runId: string;
  readonly fencingToken: number;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly stepName: string;
  readonly stepKind: string;
  /** The run's step before this commit: the step's, or the first carried step's. */
  readonly fromPosition: number;
  /** After a commit that carries: the step after this one. */
  readonly toPosition: number;
  readonly outputJson: string | null;
  readonly runOutputJson: string | null;
  readonly resultAttempt: number;
  readonly attempt: number | null;
  readonly nextStep: string | null;
  readonly effectKey: string | null;
  readonly effectAttempt: number | null;
  readonly requestHash: string | null;
  readonly resolution: string | null;
  readonly intentKey: string | null;
  readonly intentRequestHash: string | null;
  readonly intentHorizonMs: number | null;
}

const ADVANCE_VALUE_NAMES = [
  'runId', 'fencingToken', 'workerId', 'leaseMs', 'workflowName', 'workflowVersion', 'stepName', 'stepKind', 'fromPosition',
  'toPosition', 'outputJson', 'runOutputJson', 'resultAttempt', 'attempt', 'nextStep', 'effectKey', 'effectAttempt',
  'requestHash', 'resolution', 'intentKey', 'intentRequestHash', 'intentHorizonMs',
] as const satisfies ReadonlyArray<keyof AdvanceValues>;

function advanceValues(p: AdvanceParams): AdvanceValues {
  const c = p.continuation;
  const e = p.effect;
  return {
    runId: p.lease.runId,
    fencingToken: p.lease.fencingToken,
    workerId: p.lease.workerId,
    leaseMs: p.lease.leaseMs,
    workflowName: p.workflowName,
    workflowVersion: p.workflowVersion,
    stepName: p.step.name,
    stepKind: p.step.kind,
    fromPosition: p.carry?.steps[0].step.position ?? p.step.position,
    toPosition: p.step.position + 1,
    outputJson: p.skipped === true ? null : JSON.stringify(p.output),
    runOutputJson: c.kind === 'complete' ? JSON.stringify(c.runOutput) : null,
    resultAttempt: p.resultAttempt,
    attempt: p.attempt ?? null,
    nextStep: c.kind === 'hold' ? c.nextStep : null,
    effectKey: e?.key ?? null,
    effectAttempt: e === undefined || e.mode === 'reference' ? null : e.attempt,
    requestHash: e?.mode === 'insert-recorded' ? e.requestHash : null,
    resolution: e?.mode === 'record-intent' ? (e.resolution ?? null) : null,
    intentKey: c.kind === 'hold' ? (c.intent?.key ?? null) : null,
    intentRequestHash: c.kind === 'hold' ? (c.intent?.requestHash ?? null) : null,
    intentHorizonMs: c.kind === 'hold' ? (c.intent?.horizonMs ?? null) : null,
  };
}

/** The single-run commit's shapes: what {@link advanceRunText} decides from `p` rather than from its values. */
const ADVANCE_SHAPES = new Shapes();

function advanceShape(p: AdvanceParams): ShapeSlot {
  const c = p.continuation;
  const key = [
    c.kind,
    c.kind === 'complete' && c.compensated === true ? 'compensated' : '',
    p.step.compensates === undefined ? '' : 'compensation',
    p.skipped === true ? 'skipped' : '',
    p.effect?.mode ?? 'no-effect',
    p.attempt === undefined ? 'no-attempt' : 'attempt',
    c.kind === 'hold' && c.intent !== undefined ? 'next-intent' : '',
  ].join('|');
  const claimNext = c.kind === 'complete' ? c.claimNext : undefined;
  return claimNext === undefined ? ADVANCE_SHAPES.for(key) : ADVANCE_SHAPES.for(`${key}|${claimOptionsKey(claimNext.options)}`, claimNext.registry);
}

/** The text of {@link advanceRunStatement}: its shape from `p`, every value from `v` (slots, when a shape is built). */
function advanceRunText(p: AdvanceParams, v: AdvanceValues, now: number): RawBuilder<AdvanceRow> {
  const effect = p.effect;
  const insert = effect?.mode === 'insert-recorded' ? effect : undefined;
  const { step } = p;
  const carry = p.carry;
  const runSet =
    p.continuation.kind === 'hold'
      ? sql`status = 'running', lease_expires_at = statement_timestamp() + ${millis(v.leaseMs)}`
      : p.continuation.kind === 'release'
        ? sql`status = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = statement_timestamp()`
        : sql`status = ${lit(p.continuation.compensated === true ? 'compensated' : 'completed')}, lease_owner = NULL, lease_expires_at = NULL, finished_at = statement_timestamp(),
              output = ${v.runOutputJson}::jsonb`;
  // Seen in the statement's snapshot, so it never sees the row this statement inserts.
  const stepHasEffect = sql`EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = ${v.runId} AND e.step_name = ${v.stepName})`;
  const effectCte = effect === undefined ? sql`` : ledgerCte(effect.mode, v);
  const attemptCte =
    carry !== undefined
      ? sql`${carryCtes(p.lease, { name: p.workflowName, version: p.workflowVersion }, carry, now)}, finished AS (
          INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
          SELECT f.id, ${v.stepName}, ${v.attempt}, 'succeeded', ${v.fencingToken}, ${v.workerId},
                 ${carryingAttemptStart(carry, now)}, statement_timestamp()
            FROM fenced f
          RETURNING 1)`
      : p.attempt !== undefined
      ? sql`, finished AS (
          UPDATE ledgerflow.step_attempt SET status = 'succeeded', finished_at = statement_timestamp()
           WHERE run_id = ${v.runId} AND step_name = ${v.stepName} AND attempt = ${v.attempt} AND status = 'running'
             AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1)`
      : sql``;
  const nextCte =
    p.continuation.kind === 'hold'
      ? sql`, next AS (
          INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
          SELECT f.id, ${v.nextStep},
                 1 + COALESCE((SELECT max(a.attempt) FROM ledgerflow.step_attempt a
                                WHERE a.run_id = f.id AND a.step_name = ${v.nextStep}), 0),
                 'running', ${v.fencingToken}, ${v.workerId}, statement_timestamp()
            FROM fenced f
          RETURNING attempt)`
      : sql``;
  const nextIntent = p.continuation.kind === 'hold' ? p.continuation.intent : undefined;
  // The next step's intent (NextIntent): after its attempt (`next`), unless the step has a ledger
  // row already or the run is past its deadline (the driver then cancels it instead).
  const intentCte =
    nextIntent === undefined
      ? sql``
      : sql`, next_intent AS (
          INSERT INTO ledgerflow.step_effect
                 (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token,
                  intent_at, reconcile_after)
          SELECT f.id, ${v.nextStep}, ${v.intentKey}, 'null'::jsonb, 'intent', 'external', ${v.intentRequestHash},
                 n.attempt, ${v.fencingToken}, statement_timestamp(), statement_timestamp() + ${millis(v.intentHorizonMs!)}
            FROM fenced f CROSS JOIN next n
           WHERE f.overdue IS NOT TRUE
             AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = ${v.runId} AND e.step_name = ${v.nextStep})
          ON CONFLICT DO NOTHING
          RETURNING 1)`;
  const claimNext = p.continuation.kind === 'complete' ? p.continuation.claimNext : undefined;
  const fused =
    claimNext === undefined
      ? undefined
      : reusedClaimParts(claimNext.registry, claimNext.options, FUSED_CLAIM);
  return prepared(sql<AdvanceRow>`
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = ${carry === undefined ? sql`current_step + 1` : sql`${v.toPosition}, ${carriedRunCreation(carry, now)}`}, updated_at = statement_timestamp(), ${
           // A compensation keeps the error that made the run compensate.
           p.step.compensates === undefined ? sql`error = NULL, ` : sql``
         }${runSet}
       WHERE id = ${v.runId} AND fencing_token = ${v.fencingToken} AND status = 'running'
         AND current_step = ${v.fromPosition} ${insert !== undefined ? sql`AND NOT ${stepHasEffect}` : sql``}
      RETURNING id${p.continuation.kind === 'hold' ? sql`, deadline_at <= statement_timestamp() AS overdue` : sql``}
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status${
               p.skipped === true ? sql`, skipped` : sql``
             })
      SELECT id, ${v.workflowName}, ${v.workflowVersion}, ${v.stepName}, ${v.stepKind}, ${v.outputJson}::jsonb,
             ${v.resultAttempt}, ${v.effectKey}::text, ${effect === undefined ? null : 'recorded'}::text${
               p.skipped === true ? sql`, true` : sql``
             }
        FROM fenced
      RETURNING 1
    )
    ${effectCte} ${attemptCte} ${nextCte}${intentCte} ${fused === undefined ? sql`` : sql`, ${fused.ctes}`}
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           ${p.continuation.kind === 'hold' ? sql`(SELECT attempt FROM next)` : sql`NULL::int`} AS next_attempt,
           ${fused === undefined ? sql`NULL::jsonb` : sql`(SELECT COALESCE(jsonb_agg(f), '[]'::jsonb) FROM (${fused.select}) f)`} AS claimed,
           ${insert !== undefined ? stepHasEffect : sql`false`} AS effect_exists${
             p.continuation.kind === 'hold' ? sql`, (SELECT overdue FROM fenced) AS overdue` : sql``
           }${nextIntent === undefined ? sql`` : sql`, EXISTS (SELECT 1 FROM next_intent) AS intent_opened`}`);
}

/**
 * Several runs' result commits in ONE statement (group commit, see `commit-queue.ts`): the
 * same writes as {@link advanceRunStatement}, one row of input per run, each row's writes
 * joined to ITS run's fenced UPDATE — a run whose token moved on (a zombie) or whose step
 * already has a ledger row (`insert-recorded`) changes nothing, and the others commit. Returns
 * one row per commit, in the order given. At most one commit may carry a fused claim; it is
 * guarded by that commit's own run being fenced in. Kinds it takes: {@link isBatchable}.
 */
export async function advanceRuns(db: Kysely<LedgerflowDatabase>, ps: readonly AdvanceParams[]): Promise<AdvanceResult[]> {
  const { rows } = await advanceRunsStatement(ps).execute(db);
  return ps.map((p, i) => toAdvanceResult(p, rows[i]));
}

/**
 * Whether a result commit can go in a group ({@link advanceRunsStatement}): it closes a worker's
 * attempt and needs no statement of its own transaction (`fill-recorded` commits inside the
 * step's transaction, after the handler's writes).
 */
export function isBatchable(p: AdvanceParams): boolean {
  // A compensation's commit keeps the run's error and may end it `compensated`: one statement of its own.
  // So does a commit that carries earlier steps (its rows are the carry's, not one per run).
  // So does one that opens the next step's intent (the group statement has no intent rows).
  return (
    p.attempt !== undefined &&
    p.effect?.mode !== 'fill-recorded' &&
    p.step.compensates === undefined &&
    p.carry === undefined &&
    (p.continuation.kind !== 'hold' || p.continuation.intent === undefined)
  );
}

/** One row of {@link advanceRunsStatement}'s input (`jsonb_to_recordset`). */
interface GroupedCommitRow {
  readonly ord: number;
  readonly run_id: string;
  readonly fencing_token: number;
  readonly worker_id: string;
  readonly lease_ms: number;
  readonly position: number;
  readonly workflow_name: string;
  readonly workflow_version: number;
  readonly step_name: string;
  readonly step_kind: string;
  /** JSON text (NULL when skipped), so that a JSON `null` output stays a jsonb null. */
  readonly output: string | null;
  readonly skipped: boolean;
  readonly attempt: number;
  readonly result_attempt: number;
  readonly target: RunStatus;
  readonly next_step: string | null;
  readonly run_output: string | null;
  readonly effect_mode: ResultEffect['mode'] | null;
  readonly effect_key: string | null;
  readonly effect_attempt: number | null;
  readonly request_hash: string | null;
  readonly resolution: string | null;
}

/** The statement of {@link advanceRuns}; checks every commit's transitions before building it. */
export function advanceRunsStatement(ps: readonly AdvanceParams[]): RawBuilder<AdvanceRow> {
  let fusedOrd: number | undefined;
  let claimNext: FusedClaim | undefined;
  const seen = new Set<string>();
  const input = ps.map((p, ord): GroupedCommitRow => {
    const target = checkAdvance(p);
    if (!isBatchable(p)) throw new TypeError(`advanceRuns: the ${p.effect?.mode ?? 'worker-less'} commit of step "${p.step.name}" cannot be grouped.`);
    if (seen.has(p.lease.runId)) throw new TypeError(`advanceRuns: run ${p.lease.runId} has two commits in one group.`);
    seen.add(p.lease.runId);
    const c = p.continuation;
    if (c.kind === 'complete' && c.claimNext !== undefined) {
      if (claimNext !== undefined) throw new TypeError('advanceRuns: at most one commit of a group may carry a fused claim.');
      claimNext = c.claimNext;
      fusedOrd = ord;
    }
    const e = p.effect;
    return {
      ord,
      run_id: p.lease.runId,
      fencing_token: p.lease.fencingToken,
      worker_id: p.lease.workerId,
      lease_ms: p.lease.leaseMs,
      position: p.step.position,
      workflow_name: p.workflowName,
      workflow_version: p.workflowVersion,
      step_name: p.step.name,
      step_kind: p.step.kind,
      output: p.skipped === true ? null : JSON.stringify(p.output),
      skipped: p.skipped === true,
      attempt: p.attempt!,
      result_attempt: p.resultAttempt,
      target,
      next_step: c.kind === 'hold' ? c.nextStep : null,
      run_output: c.kind === 'complete' ? JSON.stringify(c.runOutput) : null,
      effect_mode: e?.mode ?? null,
      effect_key: e?.key ?? null,
      effect_attempt: e === undefined || e.mode === 'reference' ? null : e.attempt,
      request_hash: e?.mode === 'insert-recorded' ? e.requestHash : null,
      resolution: e?.mode === 'record-intent' ? (e.resolution ?? null) : null,
    };
  });
  // What the fused claim's parts assert when built: checked here too, for a shape built before.
  if (claimNext !== undefined) {
    assertRunTransition('pending', 'running');
    assertRunTransition('waiting', 'running');
    assertAttemptTransition('none', 'running');
  }
  // Built and compiled once per shape (with or without this worker's fused claim); then only the
  // rows (one jsonb parameter) and the fused row's ord are filled in (store/statement-shapes.ts).
  return shapeOf(groupShape(claimNext), [JSON.stringify(input), fusedOrd ?? null] as const, (rows, ord) =>
    groupStatement(
      rows,
      ord,
      claimNext === undefined
        ? undefined
        : claimParts(claimNext.registry, claimNext.options, {
            prefix: 'fused_',
            guard: sql`EXISTS (SELECT 1 FROM fenced WHERE ord = ${ord})`,
            takeovers: false,
          }),
    ),
  );
}

/** The group commit's shapes: one without a fused claim, one per fused claim (registry, limit, lease, worker). */
const GROUP_SHAPES = new Shapes();

function groupShape(claimNext: FusedClaim | undefined): ShapeSlot {
  return claimNext === undefined ? GROUP_SHAPES.for('') : GROUP_SHAPES.for(claimOptionsKey(claimNext.options), claimNext.registry);
}

/** The text of {@link advanceRunsStatement}: `rows` and `fusedOrd` are its only values. */
function groupStatement(rows: string, fusedOrd: number | null, fused: ClaimParts | undefined): RawBuilder<AdvanceRow> {
  const fenced = sql`fenced f JOIN input i ON i.ord = f.ord`;
  // The ledger row of an insert-recorded commit, seen in the statement's snapshot (never the row it inserts).
  const stepHasEffect = sql`EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = i.run_id AND e.step_name = i.step_name)`;
  // Fixed text per shape (the rows are one jsonb parameter): prepared like the one-run commit.
  return prepared(sql<AdvanceRow>`
    WITH input AS (
      SELECT * FROM jsonb_to_recordset(${rows}::jsonb) AS i(
        ord int, run_id uuid, fencing_token bigint, worker_id text, lease_ms double precision, position int,
        workflow_name text, workflow_version int, step_name text, step_kind text, output text, skipped boolean,
        attempt int, result_attempt int, target text, next_step text, run_output text,
        effect_mode text, effect_key text, effect_attempt int, request_hash text, resolution text)
    ),
    fenced AS (
      UPDATE ledgerflow.workflow_run r
         SET current_step = r.current_step + 1, updated_at = statement_timestamp(), error = NULL,
             status = CASE i.target WHEN 'running' THEN 'running' WHEN 'pending' THEN 'pending' WHEN 'completed' THEN 'completed' END,
             lease_owner = CASE WHEN i.target = 'running' THEN r.lease_owner END,
             lease_expires_at = CASE WHEN i.target = 'running' THEN statement_timestamp() + i.lease_ms * interval '1 millisecond' END,
             run_after = CASE WHEN i.target = 'pending' THEN statement_timestamp() ELSE r.run_after END,
             finished_at = CASE WHEN i.target = 'completed' THEN statement_timestamp() ELSE r.finished_at END,
             output = CASE WHEN i.target = 'completed' THEN i.run_output::jsonb ELSE r.output END
        FROM input i
       WHERE r.id = i.run_id AND r.fencing_token = i.fencing_token AND r.status = 'running' AND r.current_step = i.position
         AND (i.effect_mode IS DISTINCT FROM 'insert-recorded' OR NOT ${stepHasEffect})
      RETURNING i.ord, CASE WHEN i.target = 'running' THEN r.deadline_at <= statement_timestamp() END AS overdue
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status, skipped)
      SELECT i.run_id, i.workflow_name, i.workflow_version, i.step_name, i.step_kind, i.output::jsonb,
             i.result_attempt, i.effect_key, CASE WHEN i.effect_mode IS NOT NULL THEN 'recorded' END, i.skipped
        FROM ${fenced}
      RETURNING 1
    ),
    inserted_effect AS (
      INSERT INTO ledgerflow.step_effect
             (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
      SELECT i.run_id, i.step_name, i.effect_key, i.output::jsonb, 'recorded', 'transactional', i.request_hash,
             i.effect_attempt, i.fencing_token, statement_timestamp()
        FROM ${fenced}
       WHERE i.effect_mode = 'insert-recorded'
      RETURNING 1
    ),
    recorded_intent AS (
      UPDATE ledgerflow.step_effect e
         SET status = 'recorded', effect = i.output::jsonb, recorded_at = COALESCE(e.recorded_at, statement_timestamp()),
             resolution = COALESCE(i.resolution, e.resolution)
        FROM ${fenced}
       WHERE i.effect_mode = 'record-intent' AND e.workflow_id = i.run_id AND e.step_name = i.step_name
         AND e.idempotency_key = i.effect_key AND e.status = 'intent' AND e.attempt = i.effect_attempt
      RETURNING 1
    ),
    finished AS (
      UPDATE ledgerflow.step_attempt a SET status = 'succeeded', finished_at = statement_timestamp()
        FROM ${fenced}
       WHERE a.run_id = i.run_id AND a.step_name = i.step_name AND a.attempt = i.attempt AND a.status = 'running'
      RETURNING 1
    ),
    next AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT i.run_id, i.next_step,
             1 + COALESCE((SELECT max(a.attempt) FROM ledgerflow.step_attempt a
                            WHERE a.run_id = i.run_id AND a.step_name = i.next_step), 0),
             'running', i.fencing_token, i.worker_id, statement_timestamp()
        FROM ${fenced}
       WHERE i.target = 'running'
      RETURNING run_id, attempt
    ) ${fused === undefined ? sql`` : sql`, ${fused.ctes}`}
    SELECT f.ord IS NOT NULL AS fenced, n.attempt AS next_attempt, f.overdue,
           i.effect_mode = 'insert-recorded' AND ${stepHasEffect} AS effect_exists,
           ${
             fused === undefined
               ? sql`NULL::jsonb`
               : sql`CASE WHEN i.ord = ${fusedOrd} THEN (SELECT COALESCE(jsonb_agg(c), '[]'::jsonb) FROM (${fused.select}) c) END`
           } AS claimed
      FROM input i
      LEFT JOIN fenced f ON f.ord = i.ord
      LEFT JOIN next n ON n.run_id = i.run_id
     ORDER BY i.ord`);
}

/** Checks the transitions a result commit makes and that its ledger effect fits the step; returns the run's new status. */
function checkAdvance(p: AdvanceParams): RunStatus {
  const c = p.continuation;
  const target: RunStatus =
    c.kind === 'hold' ? 'running' : c.kind === 'release' ? 'pending' : c.compensated === true ? 'compensated' : 'completed';
  if ((c.kind === 'complete' && c.compensated === true) !== (c.kind === 'complete' && p.step.compensates !== undefined)) {
    throw new TypeError(`advanceRun: only the last compensation ends a run compensated (step "${p.step.name}").`);
  }
  assertRunTransition('running', target);
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
  return target;
}

/** The ledger CTE of a result commit, per {@link ResultEffect} mode (`reference` writes nothing). */
function ledgerCte(mode: ResultEffect['mode'], v: AdvanceValues): RawBuilder<unknown> {
  switch (mode) {
    case 'reference':
      return sql``;
    case 'insert-recorded':
      return sql`, effect AS (
          INSERT INTO ledgerflow.step_effect
                 (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
          SELECT id, ${v.stepName}, ${v.effectKey}, ${v.outputJson}::jsonb, 'recorded', 'transactional', ${v.requestHash},
                 ${v.effectAttempt}, ${v.fencingToken}, statement_timestamp()
            FROM fenced
          RETURNING 1)`;
    case 'fill-recorded':
    case 'record-intent':
      return sql`, effect AS (
          UPDATE ledgerflow.step_effect
             SET status = 'recorded', effect = ${v.outputJson}::jsonb, recorded_at = COALESCE(recorded_at, statement_timestamp()),
                 resolution = COALESCE(${v.resolution}::text, resolution)
           WHERE workflow_id = ${v.runId} AND step_name = ${v.stepName} AND idempotency_key = ${v.effectKey}
             AND status = ${lit(mode === 'fill-recorded' ? 'recorded' : 'intent')} AND attempt = ${v.effectAttempt}
             AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1)`;
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
