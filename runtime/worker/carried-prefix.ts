import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import { prepared } from '../store/prepared.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import { millis } from '../store/millis.js';
import { shapeOfRecord, type ShapeSlot } from '../store/statement-shapes.js';
import { carriedAttemptsCte, carriedResultCtes } from '../store/carried-rows.js';
import type { Lease } from './lease.js';
import { assertAttemptTransition, assertRunTransition } from '../store/state-machines.js';

/*
 * Commit at effect boundaries (DESIGN.md "Commits at effect boundaries"). A plain `step` has no
 * effect: run again after a crash, it is only repeated, never doubled. So the driver does not
 * commit it on its own: its result is CARRIED — kept in memory — and written by the next commit
 * the run has to make anyway, in that commit's transaction, fenced by it: the completion, an
 * effect step's commit, or the flush that comes before any other commit (a park, a child start,
 * a queue ask, an intent, a failure). Until then the database still shows the run at the first
 * carried step, its attempt `running`; a crash or a lost lease loses the carried results, and the
 * next holder runs those steps again.
 *
 * The carrying commit writes, for each carried step, what its own commit would have written: the
 * result (or skipped), its attempt `succeeded` (the first carried step's attempt, opened by the
 * last commit, is closed; the others are inserted finished, attempt 1: a step the run never
 * reached has no attempt yet), with start and end times on database time — the commit's
 * `statement_timestamp()` less what the worker measured since — so attempt history reads the same
 * as if each step had committed alone. The first attempt's start, written by an earlier statement,
 * is moved back if this statement's measures put it earlier (two statements' clock readings differ
 * by their transit: a start deferred to the run's first commit is inserted by the statement just
 * before, its start estimated the same way), so that history sorted by time keeps step order.
 */

/** A step whose result waits in memory for the run's next commit. */
export interface CarriedStep {
  readonly step: StepDefinition;
  readonly attempt: number;
  /** The output in its stored form; `undefined` when the step's condition said no (skipped). */
  readonly output: Json | undefined;
  /** `performance.now()` when the attempt started and ended (turned into database time by the commit). */
  readonly startedAt: number;
  readonly finishedAt: number;
}

/**
 * The carried steps of a run and the attempt of the step after them: the step whose commit (or a
 * flush before it) writes them. `written` once a fenced commit carried them: later commits of the
 * same attempt must not write them again.
 */
export interface Carry {
  readonly steps: readonly [CarriedStep, ...CarriedStep[]];
  /** When the attempt of the step that carries them started (`performance.now()`). */
  readonly stepStartedAt: number;
  written: boolean;
  /** Their worker events were emitted (after `written`, once). */
  reported: boolean;
}

/** A carry grows to at most this many steps; the next plain step then commits (a bound on the statement's size). */
export const MAX_CARRIED_STEPS = 16;
/**
 * A plain step that ends more than this after the first carried step started commits (with the
 * carry): a take-over redoes at most about this much work plus the step it interrupted, and a
 * commit (a few milliseconds) is then at most a fraction of a percent of the work it saves.
 */
export const MAX_CARRY_MS = 1_000;

/** Whether the step that just ended must commit rather than add itself to `steps` (the caps above). */
export function carryIsFull(steps: readonly CarriedStep[], now: number): boolean {
  const first = steps[0];
  return first !== undefined && (steps.length + 1 >= MAX_CARRIED_STEPS || now - first.startedAt >= MAX_CARRY_MS);
}

/** Where the run's commit starts from: the first carried step's position and attempt (what the database shows as running). */
export function openAttemptOf(
  carry: Carry | undefined,
  step: StepDefinition,
  attempt: number,
): { readonly step: StepDefinition; readonly attempt: number } {
  if (carry === undefined || carry.written) return { step, attempt };
  return { step: carry.steps[0].step, attempt: carry.steps[0].attempt };
}

/** One carried step as the statement reads it (`jsonb_to_recordset`). */
export interface CarriedRow {
  readonly step_name: string;
  readonly kind: string;
  /** JSON text; NULL when skipped. */
  readonly output: string | null;
  readonly skipped: boolean;
  readonly attempt: number;
  /** Milliseconds before the statement (worker-measured durations, anchored on database time). */
  readonly started_ago: number;
  readonly finished_ago: number;
  readonly first: boolean;
  /** Places before the carrying step's result (1: just before it): orders `created_at`. */
  readonly rank: number;
}

/** Apart by at least this (ms) once on database time: two microseconds, so that rounding never ties them. */
const TICK_MS = 0.002;

/**
 * How long before the statement (ms) each carried attempt started and ended, then when the
 * carrying step's attempt started: `[start0, end0, start1, end1, …, carrying start]`, strictly
 * decreasing so that history sorted by time (`getRun`: attempts by `started_at`, results by
 * `created_at`, names only to break ties) lists the steps in their order.
 */
export function carriedAgos(carry: Carry, now: number): number[] {
  const instants = [...carry.steps.flatMap((c) => [c.startedAt, c.finishedAt]), carry.stepStartedAt];
  const agos = instants.map((t) => Math.max(0, now - t));
  for (let k = agos.length - 2; k >= 0; k--) agos[k] = Math.max(agos[k]!, agos[k + 1]! + TICK_MS);
  return agos;
}

/**
 * What a carry's writes send, every value a parameter: computed once per statement, its clock
 * readings all from one `now` (`performance.now()` as the statement is built). A record of values
 * only, so that a statement that writes a carry is built once per shape (statement-shapes.ts).
 */
export interface CarryValues {
  /** The carried steps ({@link CarriedRow}[]) as JSON. */
  readonly carriedRows: string;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly runId: string;
  readonly firstStep: string;
  readonly firstAttempt: number;
  readonly fencingToken: number;
  readonly workerId: string;
  /** Milliseconds before the statement the first carried attempt started, and the step that carries them. */
  readonly firstStartAgo: number;
  readonly carryingStartAgo: number;
}

export function carryValues(
  lease: Lease,
  workflow: { readonly name: string; readonly version: number },
  carry: Carry,
  now: number,
): CarryValues {
  assertAttemptTransition('running', 'succeeded');
  assertAttemptTransition('none', 'succeeded');
  const agos = carriedAgos(carry, now);
  const rows: CarriedRow[] = carry.steps.map((c, i) => ({
    step_name: c.step.name,
    kind: c.step.kind,
    output: c.output === undefined ? null : JSON.stringify(c.output),
    skipped: c.output === undefined,
    attempt: c.attempt,
    started_ago: agos[2 * i]!,
    finished_ago: agos[2 * i + 1]!,
    first: i === 0,
    rank: carry.steps.length - i,
  }));
  const first = carry.steps[0];
  return {
    carriedRows: JSON.stringify(rows),
    workflowName: workflow.name,
    workflowVersion: workflow.version,
    runId: lease.runId,
    firstStep: first.step.name,
    firstAttempt: first.attempt,
    fencingToken: lease.fencingToken,
    workerId: lease.workerId,
    firstStartAgo: agos[0]!,
    carryingStartAgo: agos.at(-1)!,
  };
}

/**
 * The CTEs that write a carry, to follow a fenced `UPDATE … RETURNING id` named `fenced` that
 * moved the run from the first carried step's position: results, the first attempt closed, the
 * other attempts inserted finished. Each is conditioned on `fenced`, so a zombie writes nothing.
 */
export function carryCtes(v: CarryValues): RawBuilder<unknown> {
  return sql`,
    ${carriedResultCtes(v.carriedRows, v.workflowName, v.workflowVersion, 'fenced')},
    carried_first AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'succeeded', finished_at = statement_timestamp() - (SELECT c.finished_ago FROM carried c WHERE c.first) * interval '1 millisecond',
             -- Opened by an earlier statement, on its own clock reading: never after the start this statement's measures put it at.
             started_at = LEAST(started_at, statement_timestamp() - (SELECT c.started_ago FROM carried c WHERE c.first) * interval '1 millisecond')
       WHERE run_id = ${v.runId} AND step_name = ${v.firstStep} AND attempt = ${v.firstAttempt} AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    ),
    ${carriedAttemptsCte('fenced', v.fencingToken, v.workerId, true)}`;
}

/**
 * A carry's first write found the run past its deadline, before an effect step's writes: nothing
 * of that transaction commits; the driver writes the carry alone and cancels the run, as it does
 * when any commit reports the deadline before a step.
 */
export class CarriedPastDeadline extends Error {
  override readonly name = 'CarriedPastDeadline';
  constructor(runId: string, stepName: string) {
    super(
      `Run ${runId} passed its deadline while the plain steps before "${stepName}" ran; "${stepName}" does not start.`,
    );
  }
}

/**
 * The fenced run UPDATE's part for a carry: the run's creation is never after its first carried
 * attempt's start. A deferred start's insert (deferred-start.ts) dates the creation on its own
 * statement's clock reading; this statement may put the first step's start earlier by their
 * transit (see `carried_first`), and the run's history must still read in order. A deadline
 * moves with the creation it counts from.
 */
export function carriedRunCreation(v: CarryValues): RawBuilder<unknown> {
  const firstStart = sql`statement_timestamp() - ${v.firstStartAgo}::double precision * interval '1 millisecond'`;
  // The deadline counts from the creation (start-run.ts): it moves with it. SET reads the old row.
  return sql`created_at = LEAST(created_at, ${firstStart}), deadline_at = deadline_at - GREATEST(created_at - (${firstStart}), interval '0')`;
}

/** The attempt of the step that carries: `started_at` on database time, from the worker's measure. */
export function carryingAttemptStart(v: CarryValues): RawBuilder<unknown> {
  return sql`statement_timestamp() - ${v.carryingStartAgo}::double precision * interval '1 millisecond'`;
}

export interface FlushParams {
  readonly lease: Lease;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly carry: Carry;
  /** The step after the carried ones, and the attempt to open for it (`running`). */
  readonly step: StepDefinition;
  readonly attempt: number;
}

export interface FlushResult {
  readonly fenced: boolean;
  /** The run's deadline has passed (database time): the driver cancels instead of running `step`. */
  readonly overdue: boolean;
}

/**
 * Writes a carry on its own, ONE fenced statement, before a commit that cannot carry it (a park,
 * a child start, a queue ask, an intent, a failure, a compensation): the carried steps as above,
 * the run moved to `step` with its lease extended, and `step`'s attempt opened `running` — what the
 * last carried step's own commit would have done. Also the first statement of a transactional
 * step's transaction (`StepTransaction`), so that its effect commits with the carry.
 */
export async function flushCarry(db: Kysely<LedgerflowDatabase>, p: FlushParams): Promise<FlushResult> {
  const { rows } = await flushCarryStatement(p, performance.now()).execute(db);
  const row = rows[0];
  return { fenced: row?.fenced === true, overdue: row?.overdue === true };
}

/** What a flush sends: its carry's values, and the step it moves the run to. */
export interface FlushValues extends CarryValues {
  readonly fromPosition: number;
  readonly toPosition: number;
  readonly leaseMs: number;
  readonly stepName: string;
  readonly stepAttempt: number;
}

export function flushValues(p: FlushParams, now: number): FlushValues {
  assertRunTransition('running', 'running');
  assertAttemptTransition('none', 'running');
  return {
    ...carryValues(p.lease, { name: p.workflowName, version: p.workflowVersion }, p.carry, now),
    fromPosition: p.carry.steps[0].step.position,
    toPosition: p.step.position,
    leaseMs: p.lease.leaseMs,
    stepName: p.step.name,
    stepAttempt: p.attempt,
  };
}

const FLUSH_SHAPE: ShapeSlot = {};

/** The statement of {@link flushCarry}: built once, then only its values filled in. */
export function flushCarryStatement(
  p: FlushParams,
  now: number,
): RawBuilder<{ fenced: boolean; overdue: boolean | null }> {
  return shapeOfRecord(FLUSH_SHAPE, flushValues(p, now), (v) =>
    prepared(sql<{ fenced: boolean; overdue: boolean | null }>`
    WITH ${flushCtes(v)}
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, (SELECT overdue FROM fenced) AS overdue`),
  );
}

/**
 * The CTEs of {@link flushCarryStatement}: `fenced` (the run moved to `step`, its lease extended;
 * `id`, `overdue`), the carry's writes, and `step`'s attempt opened. A transactional step's
 * transaction opens its ledger row in the same statement (ledger.ts).
 */
export function flushCtes(v: FlushValues): RawBuilder<unknown> {
  return sql`
    fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = ${v.toPosition}, error = NULL, updated_at = statement_timestamp(), ${carriedRunCreation(v)},
             lease_expires_at = statement_timestamp() + ${millis(v.leaseMs)}
       WHERE id = ${v.runId} AND fencing_token = ${v.fencingToken} AND status = 'running'
         AND current_step = ${v.fromPosition}
      RETURNING id, deadline_at <= statement_timestamp() AS overdue
    ) ${carryCtes(v)},
    opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT f.id, ${v.stepName}, ${v.stepAttempt}, 'running', ${v.fencingToken}, ${v.workerId}, ${carryingAttemptStart(v)}
        FROM fenced f
      RETURNING 1
    )`;
}
