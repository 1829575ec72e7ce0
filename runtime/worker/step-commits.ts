import { sql, type Kysely, type RawBuilder } from 'kysely';
import { isEffectKind } from '../../dsl/step-kind.js';
import { recordOfSlots, shapeOf } from '../store/statement-shapes.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { toLeasedRun } from '../store/leased-run.js';
import { assertAttemptTransition, assertEffectTransition, assertRunTransition } from '../store/state-machines.js';
import {
  assertFusedClaim,
  COLUMNS,
  columnsOf,
  commitShapeOf,
  commitShapeSlot,
  commitStatement,
  GROUP_SHAPE,
  groupFused,
  listed,
  oneRunFused,
  rowJson,
  valuesOf,
  targetOf,
} from './commit-statement.js';
import type { AdvanceParams, AdvanceResult, AdvanceRow, FusedClaim } from './result-commit.js';
import { carryValues } from './carried-prefix.js';

/*
 * A step's result commit: `advanceRun` for one run, `advanceRuns` for a group (commit-queue.ts),
 * what they are asked in result-commit.ts and their one statement in commit-statement.ts. Like
 * every write that changes a run (yield-commits.ts, failure-commits.ts, crash-commits.ts,
 * wait-commits.ts, ledger.ts), it is fenced: it changes the run only
 * `WHERE id = $run AND fencing_token = $token AND status = 'running'`, and every other write of
 * the commit is conditioned on that row having been changed, so a worker whose token moved on
 * (a zombie) changes nothing. Where possible a commit is ONE statement (data-modifying CTEs):
 * one round trip, atomic without BEGIN/COMMIT.
 */

/**
 * Step result + attempt succeeded + ledger row (recorded) + run transition, in ONE statement.
 * The step_result foreign key makes the database itself refuse an effect step's result without
 * a `recorded` ledger row under its key. A fused claim (`complete` with `claimNext`) adds the
 * claim's CTEs (prefixed `fused_`, pending runs only) guarded by this commit being fenced in:
 * a zombie's rolled-back completion claims nothing.
 */
export async function advanceRun(db: Kysely<LedgerflowDatabase>, p: AdvanceParams): Promise<AdvanceResult> {
  const { rows } = await advanceRunStatement(p).execute(db);
  return advanceResultOf(p, rows[0]);
}

/** What {@link advanceRun} returns, from the row its statement answered (for a caller that sent the statement itself). */
export function advanceResultOf(p: AdvanceParams, row: AdvanceRow | undefined): AdvanceResult {
  const result = toAdvanceResult(p, row);
  // Inside a step's transaction this is only final at its COMMIT: that commit carries nothing (see StepTransaction).
  if (result.fenced && p.carry !== undefined) p.carry.written = true;
  if (p.continuation.kind === 'hold' && p.continuation.intent !== undefined) {
    p.continuation.intent.opened = result.fenced && row?.intent_opened === true;
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
  const oneRow = (values: readonly unknown[]) =>
    sql`SELECT ${listed(columns.map((c, i) => sql`${values[i]}::${sql.raw(COLUMNS[c][0])} AS ${sql.raw(c)}`))}`;
  // A commit that carries earlier steps sends them and their times (from `now`) as values too.
  const carry =
    p.carry === undefined
      ? undefined
      : carryValues(p.lease, { name: p.workflowName, version: p.workflowVersion }, p.carry, now);
  const values = valuesOf(p, 0, columns);
  const n = values.length;
  values.push(0);
  if (carry !== undefined) values.push(...Object.values(carry));
  // Built and compiled once per shape; then only the values are filled in (store/statement-shapes.ts).
  return shapeOf(commitShapeSlot('one', shape, claimNext), values, (...slots) =>
    commitStatement(
      shape,
      { source: 'one', rows: oneRow(slots.slice(0, n)) },
      oneRunFused(claimNext, slots[n]),
      carry === undefined ? undefined : recordOfSlots(carry, slots.slice(n + 1)),
    ),
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
export async function advanceRuns(
  db: Kysely<LedgerflowDatabase>,
  ps: readonly AdvanceParams[],
): Promise<AdvanceResult[]> {
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
    if (!isBatchable(p))
      throw new TypeError(
        `advanceRuns: the ${p.effect?.mode ?? 'worker-less'} commit of step "${p.step.name}" cannot be grouped.`,
      );
    if (seen.has(p.lease.runId)) throw new TypeError(`advanceRuns: run ${p.lease.runId} has two commits in one group.`);
    seen.add(p.lease.runId);
    const c = p.continuation;
    if (c.kind === 'complete' && c.claimNext !== undefined) {
      if (claimNext !== undefined)
        throw new TypeError('advanceRuns: at most one commit of a group may carry a fused claim.');
      claimNext = c.claimNext;
      fusedOrd = ord;
    }
    return rowJson(p, ord, columns);
  });
  if (claimNext !== undefined) assertFusedClaim();
  // Built and compiled once per shape (with or without this worker's fused claim); then only the
  // rows (one jsonb parameter) and the fused row's ord are filled in (store/statement-shapes.ts).
  return shapeOf(
    commitShapeSlot('group', GROUP_SHAPE, claimNext),
    [`[${rows.join(',')}]`, fusedOrd ?? null] as const,
    (json, ord) =>
      commitStatement(
        GROUP_SHAPE,
        {
          source: 'group',
          rows: sql`SELECT * FROM jsonb_to_recordset(${json}::jsonb) AS i(
        ${listed(columns.map((c) => sql.raw(`${c} ${COLUMNS[c][0]}`)))})`,
        },
        groupFused(claimNext, ord),
      ),
  );
}

/** Checks the transitions a result commit makes and that its ledger effect fits the step. */
function checkAdvance(p: AdvanceParams): void {
  const c = p.continuation;
  if (
    (c.kind === 'complete' && c.compensated === true) !== (c.kind === 'complete' && p.step.compensates !== undefined)
  ) {
    throw new TypeError(`advanceRun: only the last compensation ends a run compensated (step "${p.step.name}").`);
  }
  assertRunTransition('running', targetOf(c));
  if (p.attempt !== undefined) assertAttemptTransition(p.carry === undefined ? 'running' : 'none', 'succeeded');
  if (p.carry !== undefined && p.attempt === undefined)
    throw new TypeError(`advanceRun: only a worker's attempt carries earlier steps (step "${p.step.name}").`);
  if (p.continuation.kind === 'hold') assertAttemptTransition('none', 'running');
  if (p.continuation.kind === 'hold' && p.continuation.intent !== undefined) assertEffectTransition('none', 'intent');
  const effect = p.effect;
  if (effect?.mode === 'record-intent') assertEffectTransition('intent', 'recorded');
  // fill-recorded completes the row this same transaction inserted (openingStatement):
  // seen from outside, the commit takes the step's ledger row from none to recorded.
  if (effect?.mode === 'insert-recorded' || effect?.mode === 'fill-recorded')
    assertEffectTransition('none', 'recorded');
  const needsEffect = isEffectKind(p.step.kind) && p.skipped !== true;
  if (
    (effect !== undefined) !== needsEffect ||
    (effect?.mode === 'insert-recorded' && p.step.kind !== 'transactional')
  ) {
    throw new TypeError(
      `advanceRun: ledger effect ${effect?.mode ?? 'none'} does not fit ${p.step.kind} step "${p.step.name}".`,
    );
  }
}
