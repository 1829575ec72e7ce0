import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';
import { prepared } from '../store/prepared.js';
import { flattened } from '../store/statement-shapes.js';
import { LEASE_EXPIRED, toLeasedRun, type LeasedRun, type LeasedRunRow } from '../store/leased-run.js';
import { millis } from '../store/millis.js';
import { ofServedVersion, type WorkflowRegistry } from './registry.js';
import { countsTowardBudget } from './retry.js';
import { onFastPath, slotsAsked } from '../store/queue-partition.js';
import {
  assertAttemptTransition,
  assertRunTransition,
  DUE_RUN_STATUSES,
  sqlStatusList,
} from '../store/state-machines.js';

/*
 * The one claim statement: due runs taken for this worker, the next fencing token, a lease of
 * `leaseMs`, and the current step's attempt opened — standalone (the claim loop, `claimRuns`) or
 * as CTEs fused into a completion commit (`FUSED_CLAIM`, commit-statement.ts). The run transitions it
 * writes: `pending -> running` and `waiting -> running` once `run_after` is due, and standalone
 * only `running -> running` for a run whose lease expired (a take-over: its running attempt
 * closed `abandoned` with `LeaseExpired`, which the crash limit counts). No state of its own but
 * the built CTEs, cached per placement, registry and options (`reusedClaimParts`).
 */

/** What tells one {@link ClaimOptions} from another, as a cache key (with the registry). */
export function claimOptionsKey(options: ClaimOptions): string {
  return `${options.limit}|${options.leaseMs}|${options.workerId}`;
}

export interface ClaimOptions {
  readonly workerId: string;
  readonly leaseMs: number;
  readonly limit: number;
}

/** What {@link claimStatement} and a fused claim (inside a step's commit) are made of. */
export interface ClaimParts {
  /** Data-modifying CTEs, to follow other CTEs after a comma. */
  readonly ctes: RawBuilder<unknown>;
  /** A SELECT of {@link LeasedRunRow}s over those CTEs. */
  readonly select: RawBuilder<unknown>;
}

/** Where the claim's CTEs go: a statement of their own, or fused into a step's commit. */
export interface ClaimPlacement {
  /** Prefix of the CTE names, apart from those of the statement they are fused into. */
  readonly prefix: string;
  /** A condition every candidate must also meet (fused: the step commit is fenced in). */
  readonly guard?: RawBuilder<unknown>;
  /**
   * Whether runs under an expired lease are taken too. A fused claim takes pending runs only:
   * a takeover closes another worker's attempt, and nothing about that may fail a step commit.
   */
  readonly takeovers: boolean;
}

/** The due statuses as the literal list of workflow_run_due_idx's predicate, so the planner uses it. */
const DUE_SQL = sqlStatusList(DUE_RUN_STATUSES);

const STANDALONE: ClaimPlacement = { prefix: '', takeovers: true };

/**
 * The claim, as CTEs (see {@link claimRuns}).
 *
 * Candidates come from index scans, never from a sort of everything that is due: runs whose
 * lease expired in `lease_expires_at` order (workflow_run_leased_idx), then due pending and
 * waiting runs in `run_after` order (workflow_run_due_idx), each locked `SKIP LOCKED` and cut at
 * the limit. Rows are pulled lazily, so the due index is not read when takeovers fill the claim.
 *
 * The current step's attempt history is read once (snapshot: before this claim's changes):
 * the next attempt number, failures, and crashes (`LeaseExpired`) — plus one if this claim
 * abandons a running attempt. A run taken over from a repeated crash gets no attempt.
 */
export function claimParts(
  registry: WorkflowRegistry,
  options: ClaimOptions,
  placement: ClaimPlacement = STANDALONE,
): ClaimParts {
  for (const from of DUE_RUN_STATUSES) assertRunTransition(from, 'running');
  if (placement.takeovers) {
    assertRunTransition('running', 'running');
    assertAttemptTransition('running', 'abandoned');
  }
  assertAttemptTransition('none', 'running');
  const name = (cte: string): RawBuilder<unknown> => sql.raw(`${placement.prefix}${cte}`);
  const at = sql`statement_timestamp()`;
  const registered = ofServedVersion(registry);
  const guarded = placement.guard === undefined ? sql`` : sql`AND ${placement.guard}`;
  const due = sql`
      SELECT r.id
        FROM ledgerflow.workflow_run r
       WHERE r.status IN (${DUE_SQL}) AND r.run_after <= ${at} AND ${registered} ${guarded}
       ORDER BY r.run_after
       LIMIT ${options.limit}
         FOR NO KEY UPDATE SKIP LOCKED`;
  const candidates = placement.takeovers
    ? sql`
    ${name('expired')} AS (
      SELECT r.id
        FROM ledgerflow.workflow_run r
       WHERE r.status = 'running' AND r.lease_expires_at <= ${at} AND ${registered} ${guarded}
       ORDER BY r.lease_expires_at
       LIMIT ${options.limit}
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    ${name('due')} AS (${due}
    ),
    ${name('candidate')} AS (
      SELECT id FROM ${name('expired')}
      UNION ALL
      SELECT id FROM ${name('due')}
      LIMIT ${options.limit}
    )`
    : sql`
    ${name('candidate')} AS (${due}
    )`;
  const abandoned = placement.takeovers
    ? sql`,
    ${name('abandoned')} AS (
      UPDATE ledgerflow.step_attempt a
         SET status = 'abandoned', finished_at = ${at},
             error = jsonb_build_object('name', ${LEASE_EXPIRED}::text,
                       'message', 'the worker holding this attempt stopped renewing its lease; the run was claimed again (it may have died in a later plain step: those commit with the next step that must, see carried steps)')
        FROM ${name('claimed')} c
       WHERE a.run_id = c.id AND a.status = 'running'
      RETURNING a.run_id
    )`
    : sql``;
  const uses = fastSlotUses(registry);
  // A slot of a queue limited by concurrency alone, taken for the current step of each run claimed
  // from the due index (not a take-over: closing the crashed attempt gives its step's slot back at
  // the statement's end); what was taken is listed per run (`slots_taken`), the rest asked as before.
  const slotTaken =
    uses.length === 0
      ? sql``
      : sql`,
    ${name('slot_taken')} AS MATERIALIZED (
      SELECT c.id AS run_id, u.step
        FROM ${name('claimed')} c
        JOIN unnest(${uses.map((u) => u.workflow)}::text[], ${uses.map((u) => u.version)}::int[],
                    ${uses.map((u) => u.position)}::int[], ${uses.map((u) => u.queue)}::text[],
                    ${uses.map((u) => u.step)}::text[]) AS u(workflow_name, version, position, queue, step)
          ON u.workflow_name = c.workflow_name AND u.version = c.workflow_version AND u.position = c.current_step
       WHERE CASE WHEN ${placement.takeovers ? sql`EXISTS (SELECT 1 FROM ${name('expired')} x WHERE x.id = c.id)` : sql`false`} THEN false
                  ELSE ledgerflow.queue_take_fast(u.queue, '*', c.id, u.step) END
    )`;
  const ctes = sql`${candidates},
    ${name('claimed')} AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running',
             waiting_for = NULL,
             lease_owner = ${options.workerId},
             lease_expires_at = ${at} + ${millis(options.leaseMs)},
             fencing_token = ledgerflow.next_fencing_token(r.fencing_token),
             updated_at = ${at}
        FROM ${name('candidate')} c
       WHERE r.id = c.id
      RETURNING r.id, r.workflow_name, r.workflow_version, r.input, r.current_step, r.fencing_token, r.budget_step, r.budget_base,
                COALESCE(r.deadline_at <= ${at}, false) AS overdue, r.trace_context
    ),
    ${name('history')} AS (
      SELECT c.id AS run_id, d.step_name, c.fencing_token,
             COALESCE(max(a.attempt), 0) AS last_attempt,
             count(a.attempt) FILTER (WHERE a.status = 'failed' AND ${countsTowardBudget('a', 'c')})::int AS failures,
             count(a.attempt) FILTER (WHERE a.status = 'abandoned' AND a.error->>'name' = ${LEASE_EXPIRED}::text
                                        AND ${countsTowardBudget('a', 'c')})::int AS crashes
        FROM ${name('claimed')} c
        JOIN ledgerflow.workflow_step_def d
          ON d.workflow_name = c.workflow_name AND d.version = c.workflow_version AND d.position = c.current_step
        LEFT JOIN ledgerflow.step_attempt a ON a.run_id = c.id AND a.step_name = d.step_name
       GROUP BY c.id, d.step_name, c.fencing_token, c.budget_step, c.budget_base
    )${abandoned},
    ${name('opened')} AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT h.run_id, h.step_name, h.last_attempt + 1, 'running', h.fencing_token, ${options.workerId}, ${at}
        FROM ${name('history')} h
       WHERE ${placement.takeovers ? sql`h.crashes = 0 OR NOT EXISTS (SELECT 1 FROM ${name('abandoned')} x WHERE x.run_id = h.run_id)` : sql`true`}
      RETURNING run_id, attempt
    )${slotTaken}`;
  const crashedNow = placement.takeovers ? sql`x.run_id IS NOT NULL` : sql`false`;
  const select = sql`
    SELECT c.id, c.workflow_name, c.workflow_version, c.input, c.current_step, c.fencing_token, c.overdue,
           o.attempt,
           COALESCE(h.failures, 0) AS prior_failures,
           COALESCE(h.crashes, 0) + (CASE WHEN ${crashedNow} THEN 1 ELSE 0 END) AS crashes,
           (${crashedNow} AND COALESCE(h.crashes, 0) > 0) AS repeated_crash,
           ${crashedNow} AS took_over, c.trace_context,
           CASE WHEN c.current_step > 0 THEN
             (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res
               WHERE res.run_id = c.id AND NOT res.skipped)
           END AS outputs${
             uses.length === 0
               ? sql``
               : sql`,
           (SELECT array_agg(t.step) FROM ${name('slot_taken')} t WHERE t.run_id = c.id) AS slots_taken`
           }
      FROM ${name('claimed')} c
      LEFT JOIN ${name('history')} h ON h.run_id = c.id
      ${placement.takeovers ? sql`LEFT JOIN ${name('abandoned')} x ON x.run_id = c.id` : sql``}
      LEFT JOIN ${name('opened')} o ON o.run_id = c.id`;
  return { ctes, select };
}

/** A queue slot the claim takes for a run at `position` of `workflow@version` (see {@link fastSlotUses}). */
interface FastSlotUse {
  readonly workflow: string;
  readonly version: number;
  readonly position: number;
  readonly queue: string;
  /** '' for the workflow's own queue (the whole run's slot), else the step's name. */
  readonly step: string;
}

/**
 * The slots a claimed run's current step would ask for first on the fast path (core 0022), which
 * the claim takes instead (core 0024): at a step of the workflow's own (never a compensation,
 * which holds no slot), with no condition (a skipped step asks for nothing), that asks for exactly
 * one slot — of a queue declared with a concurrency limit alone, used without a partition key.
 * A step that needs both the run's slot and its own asks for them in order, as before: taking the
 * second without the first would hold it while waiting in line for the first.
 */
function fastSlotUses(registry: WorkflowRegistry): FastSlotUse[] {
  const uses: FastSlotUse[] = [];
  for (const workflow of registry.all) {
    for (const step of workflow.steps.slice(0, workflow.stepCount)) {
      if (step.when !== undefined) continue;
      // At the run's first step in a flight: the run's slot is not held yet.
      const asked = slotsAsked(workflow.registration.workflow.queue, step, false);
      const [only] = asked;
      if (asked.length !== 1 || only === undefined || !onFastPath(only.use)) continue;
      uses.push({
        workflow: workflow.name,
        version: workflow.version,
        position: step.position,
        queue: only.use.queue.name,
        step: only.step,
      });
    }
  }
  return uses;
}

/** A claim fused into a step's completion commit: pending runs only, and only if that commit is fenced in. */
export const FUSED_CLAIM: ClaimPlacement = {
  prefix: 'fused_',
  guard: sql`EXISTS (SELECT 1 FROM fenced)`,
  takeovers: false,
};

const builtParts = new WeakMap<ClaimPlacement, WeakMap<WorkflowRegistry, Map<string, ClaimParts>>>();

/**
 * {@link claimParts}, built once per placement, registry and options and reused: a fused claim
 * rides on every completion commit, and its builders (values included: registry, limit, worker,
 * lease) are the same from one commit to the next. Kysely's builders are immutable, so sharing
 * them is safe. Keyed by the placement object: pass a constant (`FUSED_CLAIM`), not a fresh one.
 */
export function reusedClaimParts(
  registry: WorkflowRegistry,
  options: ClaimOptions,
  placement: ClaimPlacement = STANDALONE,
): ClaimParts {
  let byRegistry = builtParts.get(placement);
  if (byRegistry === undefined) builtParts.set(placement, (byRegistry = new WeakMap()));
  let byOptions = byRegistry.get(registry);
  if (byOptions === undefined) byRegistry.set(registry, (byOptions = new Map()));
  const key = claimOptionsKey(options);
  let parts = byOptions.get(key);
  if (parts === undefined) {
    // Compiled once, into text pieces and constant parameters (store/statement-shapes.ts): the
    // claim's tree of fragments is walked here, not again at every claim and fused completion.
    const built = claimParts(registry, options, placement);
    byOptions.set(key, (parts = { ctes: flattened(built.ctes), select: flattened(built.select) }));
  }
  return parts;
}

/** The claim statement on its own; exported so that tests can EXPLAIN exactly what runs. */
export function claimStatement(registry: WorkflowRegistry, options: ClaimOptions): RawBuilder<LeasedRunRow> {
  const { ctes, select } = reusedClaimParts(registry, options);
  return prepared(sql<LeasedRunRow>`WITH ${ctes} ${select}`);
}

/**
 * Claims up to `limit` runnable runs of the registered workflow versions in ONE statement (one
 * round trip, one commit): runs that are pending and due, or running under an expired lease.
 * `FOR NO KEY UPDATE SKIP LOCKED` lets concurrent workers take disjoint runs without waiting
 * (NO KEY: the key-share lock that an in-flight transactional step's ledger insert holds on the
 * run through its foreign key must not hide the run, or a stalled zombie could never be
 * overtaken); each claimed run gets the next fencing token (`ledgerflow.next_fencing_token`: one
 * more, never below the floor of the server's WAL timeline, so not one a promotion lost either,
 * core 0023), so whatever the previous owner still tries to commit is refused. In the same commit
 * the previous owner's `running` attempt is closed as `abandoned` (`LeaseExpired`: it crashed, as
 * far as anyone can tell) and the current
 * step's next attempt (max + 1: gap-free) is opened — unless the step had already crashed
 * before: then no attempt is opened and the worker backs off or gives up (poison step).
 * Times are the database's (`statement_timestamp()`).
 */
export async function claimRuns(
  db: Kysely<LedgerflowDatabase>,
  registry: WorkflowRegistry,
  options: ClaimOptions,
): Promise<LeasedRun[]> {
  const { rows } = await claimStatement(registry, options).execute(db);
  return rows.map(toLeasedRun);
}
