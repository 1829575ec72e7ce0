import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Json, LedgerflowDatabase, WaitingFor } from '../store/tables.js';
import { millis } from '../store/millis.js';
import { QUEUE_NO_PARTITION } from '../store/queue-partition.js';
import { RUNS_CHANNEL } from '../store/channels.js';
import type { Lease } from './lease.js';
import { assertAttemptTransition, assertRunTransition } from '../store/state-machines.js';

/*
 * The fenced statements of the steps that wait — `sleep`, `waitFor`, `child`, `forEach` — and of
 * a run's deadline (DESIGN.md "Waiting"). Like step-commits.ts, each changes anything only if the
 * run is still `running` under the caller's fencing token.
 *
 * A waiting run is `waiting` with `run_after` = when it must be looked at next; the claim takes
 * it from the same partial index as pending runs once that time comes. What wakes it earlier
 * moves `run_after` to now: `sendEvent` (events), the `run_settled` trigger (children).
 */

const fencedRun = (lease: Lease): RawBuilder<unknown> =>
  sql`EXISTS (SELECT 1 FROM ledgerflow.workflow_run r
               WHERE r.id = ${lease.runId} AND r.fencing_token = ${lease.fencingToken} AND r.status = 'running')`;

/** What a step waits for, as first recorded: its wake-up time or timeout never changes once written. */
export interface OpenedWait {
  readonly fenced: boolean;
  /** `null`: no time limit (a `waitFor` without `timeoutMs`). */
  readonly until: Date | null;
  /** `until` has passed, on database time. */
  readonly due: boolean;
}

export type WaitSpec =
  | { readonly kind: 'sleep'; readonly until: { readonly afterMs: number } | { readonly at: Date } }
  | { readonly kind: 'event'; readonly event: string; readonly key: string; readonly timeoutMs: number | undefined };

/**
 * Records, the first time the run reaches the step, what it waits for (ON CONFLICT DO NOTHING:
 * later attempts find the first row) and returns it. One statement.
 */
export async function openWait(
  db: Kysely<LedgerflowDatabase>,
  lease: Lease,
  stepName: string,
  spec: WaitSpec,
): Promise<OpenedWait> {
  const { rows } = await openWaitStatement(lease, stepName, spec).execute(db);
  const row = rows[0];
  return { fenced: row?.fenced === true, until: row?.until ?? null, due: row?.due === true };
}

export function openWaitStatement(
  lease: Lease,
  stepName: string,
  spec: WaitSpec,
): RawBuilder<{ fenced: boolean; until: Date | null; due: boolean | null }> {
  const until =
    spec.kind === 'sleep'
      ? 'afterMs' in spec.until
        ? sql`statement_timestamp() + ${millis(spec.until.afterMs)}`
        : sql`${spec.until.at.toISOString()}::timestamptz`
      : spec.timeoutMs === undefined
        ? sql`NULL::timestamptz`
        : sql`statement_timestamp() + ${millis(spec.timeoutMs)}`;
  const event = spec.kind === 'event' ? spec.event : null;
  const key = spec.kind === 'event' ? spec.key : null;
  return sql<{ fenced: boolean; until: Date | null; due: boolean | null }>`
    WITH opened AS (
      INSERT INTO ledgerflow.step_wait (run_id, step_name, kind, until, event_name, correlation_key, created_at)
      SELECT ${lease.runId}, ${stepName}, ${spec.kind}, ${until}, ${event}::text, ${key}::text, statement_timestamp()
       WHERE ${fencedRun(lease)}
      ON CONFLICT (run_id, step_name) DO NOTHING
      RETURNING until
    ),
    wait AS (
      SELECT until FROM opened
      UNION ALL
      SELECT w.until FROM ledgerflow.step_wait w
       WHERE w.run_id = ${lease.runId} AND w.step_name = ${stepName} AND NOT EXISTS (SELECT 1 FROM opened)
    )
    SELECT ${fencedRun(lease)} AS fenced, w.until, w.until <= statement_timestamp() AS due
      FROM (SELECT 1) one LEFT JOIN wait w ON true`;
}

/** Marks a step's wait as over (the step completes in the same transaction): senders stop waking the run for it. */
export function resolveWaitStatement(lease: Lease, stepName: string): RawBuilder<unknown> {
  return sql`
    UPDATE ledgerflow.step_wait SET resolved_at = statement_timestamp()
     WHERE run_id = ${lease.runId} AND step_name = ${stepName} AND resolved_at IS NULL AND ${fencedRun(lease)}`;
}

export interface TakenEvent {
  readonly id: string;
  readonly payload: Json;
  readonly createdAt: Date;
}

/**
 * Takes the oldest event of this name and key that no step has taken: written as consumed by
 * this run's step, once (`consumed_at IS NULL`). Must run in the transaction that completes the
 * step, after `lockEventKeyStatement` (store/event-key-lock.ts).
 */
export async function takeEvent(
  db: Kysely<LedgerflowDatabase>,
  lease: Lease,
  stepName: string,
  event: string,
  key: string,
): Promise<TakenEvent | undefined> {
  const { rows } = await takeEventStatement(lease, stepName, event, key).execute(db);
  const row = rows[0];
  return row === undefined ? undefined : { id: row.id, payload: row.payload, createdAt: row.created_at };
}

export function takeEventStatement(
  lease: Lease,
  stepName: string,
  event: string,
  key: string,
): RawBuilder<{ id: string; payload: Json; created_at: Date }> {
  return sql<{ id: string; payload: Json; created_at: Date }>`
    UPDATE ledgerflow.event
       SET consumed_by_run = ${lease.runId}, consumed_by_step = ${stepName}, consumed_at = statement_timestamp()
     WHERE id = (SELECT e.id FROM ledgerflow.event e
                  WHERE e.name = ${event} AND e.correlation_key = ${key} AND e.consumed_at IS NULL
                  ORDER BY e.created_at, e.id
                  LIMIT 1
                    FOR UPDATE)
       AND consumed_at IS NULL AND ${fencedRun(lease)}
    RETURNING id, payload, created_at`;
}

export interface SuspendParams {
  readonly lease: Lease;
  readonly stepName: string;
  readonly attempt: number;
  readonly waitingFor: WaitingFor;
  /** Look at the run again at this time at the latest (`null`: only when woken or at its deadline). */
  readonly until: Date | null;
}

/**
 * The run stops holding a lease and waits: `running -> waiting`, its attempt `suspended`,
 * `run_after` = the earliest of `until` and the run's deadline. A `children` wait reads its
 * counters from the run row as this statement locks it, so a child that settled a moment ago —
 * whose trigger found the run still `running` and did not wake it — is not missed: the run is
 * then due at once. Returns whether it is due now (then it is claimable at once, and workers
 * are notified).
 */
export async function suspendRun(
  db: Kysely<LedgerflowDatabase>,
  p: SuspendParams,
): Promise<{ fenced: boolean; due: boolean }> {
  const { rows } = await suspendRunStatement(p).execute(db);
  return { fenced: rows[0]?.fenced === true, due: rows[0]?.due === true };
}

export function suspendRunStatement(
  p: SuspendParams,
): RawBuilder<{ fenced: boolean; due: boolean | null; notified: unknown }> {
  assertRunTransition('running', 'waiting');
  assertAttemptTransition('running', 'suspended');
  const { lease } = p;
  const w = p.waitingFor;
  const later = sql`LEAST(COALESCE(${p.until?.toISOString() ?? null}::timestamptz, 'infinity'), COALESCE(deadline_at, 'infinity'))`;
  const wakeNow = w.kind === 'children' ? sql`(children_open < ${w.wakeBelow} OR children_failed > 0)` : sql`false`;
  const waitingFor =
    w.kind === 'children'
      ? sql`jsonb_set(${JSON.stringify(w)}::jsonb, '{open}', to_jsonb(children_open))`
      : sql`${JSON.stringify(w)}::jsonb`;
  return sql<{ fenced: boolean; due: boolean | null; notified: unknown }>`
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET status = 'waiting', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
             waiting_for = ${waitingFor},
             run_after = CASE WHEN ${wakeNow} THEN statement_timestamp() ELSE ${later} END
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
      RETURNING id, run_after <= statement_timestamp() AS due
    ),
    attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'suspended', finished_at = statement_timestamp(),
             error = ${JSON.stringify({ name: 'Suspended', message: describeWait(w) })}::jsonb
       WHERE run_id = ${lease.runId} AND step_name = ${p.stepName} AND attempt = ${p.attempt} AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, (SELECT due FROM fenced) AS due,
           (SELECT pg_notify(${RUNS_CHANNEL}, id::text) FROM fenced WHERE due) AS notified`;
}

/** One line saying what a waiting run waits for (attempt history, CLI). */
export function describeWait(w: WaitingFor): string {
  switch (w.kind) {
    case 'sleep':
      return `sleeping until ${w.until}`;
    case 'event':
      return `waiting for event ${w.event} with key ${w.key}${w.until === null ? '' : ` until ${w.until}`}`;
    case 'children':
      return `waiting for ${w.open} of ${w.total} children`;
    case 'queue':
      return `waiting for a slot of queue ${w.queue}${w.partition === QUEUE_NO_PARTITION ? '' : ` (partition ${w.partition})`}`;
  }
}

/**
 * The run's deadline passed: `running -> cancelled` (the `run_settled` trigger closes its
 * attempt and cancels its children). One fenced statement.
 */
export async function cancelOverdue(db: Kysely<LedgerflowDatabase>, lease: Lease): Promise<boolean> {
  const { rows } = await cancelOverdueStatement(lease).execute(db);
  return rows[0]?.fenced === true;
}

export function cancelOverdueStatement(lease: Lease): RawBuilder<{ fenced: boolean }> {
  assertRunTransition('running', 'cancelled');
  return sql<{ fenced: boolean }>`
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, fencing_token = ledgerflow.next_fencing_token(fencing_token),
             finished_at = statement_timestamp(), updated_at = statement_timestamp(),
             error = jsonb_build_object('name', 'DeadlineExceeded',
                                        'message', 'the run was still unfinished at its deadline (' || deadline_at || ')')
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
         AND deadline_at <= statement_timestamp()
      RETURNING id
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced`;
}

/** One child to start: its position in the step's list, run id, dedupe key and validated input (JSON text). */
export interface ChildToStart {
  readonly index: number;
  readonly id: string;
  readonly key: string;
  readonly input: string;
}

export interface StartChildrenParams {
  readonly lease: Lease;
  readonly stepName: string;
  readonly child: { readonly name: string; readonly version: number; readonly timeoutMs: number | undefined };
  readonly children: readonly ChildToStart[];
  /**
   * The trace context the children continue: the starting step's span, when traced; otherwise
   * (null) they inherit the parent's stored `trace_context`.
   */
  readonly traceContext: Json | null;
}

/**
 * Starts a batch of children in one fenced statement that also renews the parent's lease. A
 * child already started for the same (parent, step, index) — by an attempt that crashed after
 * this commit — is skipped (ON CONFLICT on that triple), so no child is started twice; the
 * parent's `children_open` grows by exactly the children this statement inserts. A dedupe key
 * that names a run this step did not start is a unique violation (the caller reports it).
 */
export async function startChildren(
  db: Kysely<LedgerflowDatabase>,
  p: StartChildrenParams,
): Promise<{ fenced: boolean; started: number }> {
  const { rows } = await startChildrenStatement(p).execute(db);
  return { fenced: rows[0]?.fenced === true, started: Number(rows[0]?.started ?? 0) };
}

export function startChildrenStatement(
  p: StartChildrenParams,
): RawBuilder<{ fenced: boolean; started: number | string; notified: unknown }> {
  assertRunTransition('running', 'running');
  const { lease } = p;
  const deadline =
    p.child.timeoutMs === undefined
      ? sql`NULL::timestamptz`
      : sql`statement_timestamp() + ${millis(p.child.timeoutMs)}`;
  const idx = p.children.map((c) => c.index);
  const ids = p.children.map((c) => c.id);
  const keys = p.children.map((c) => c.key);
  const inputs = p.children.map((c) => c.input);
  return sql<{ fenced: boolean; started: number | string; notified: unknown }>`
    WITH items AS (
      SELECT * FROM unnest(${idx}::int[], ${ids}::uuid[], ${keys}::text[], ${inputs}::jsonb[]) AS i(idx, id, key, input)
    ),
    fresh AS (
      SELECT i.* FROM items i
       WHERE NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run c
                          WHERE c.parent_run_id = ${lease.runId} AND c.parent_step = ${p.stepName} AND c.parent_index = i.idx)
    ),
    fenced AS (
      UPDATE ledgerflow.workflow_run
         SET children_open = children_open + (SELECT count(*) FROM fresh),
             lease_expires_at = statement_timestamp() + ${millis(lease.leaseMs)}, updated_at = statement_timestamp()
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
      RETURNING id, trace_context
    ),
    inserted AS (
      INSERT INTO ledgerflow.workflow_run
             (id, workflow_name, workflow_version, input, dedupe_key, parent_run_id, parent_step, parent_index, deadline_at, trace_context)
      SELECT f.id, ${p.child.name}, ${p.child.version}, f.input, f.key, ${lease.runId}, ${p.stepName}, f.idx, ${deadline},
             COALESCE(${p.traceContext === null ? null : JSON.stringify(p.traceContext)}::jsonb, p.trace_context)
        FROM fresh f, fenced p
      ON CONFLICT (parent_run_id, parent_step, parent_index) DO NOTHING
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, (SELECT count(*) FROM inserted) AS started,
           (SELECT pg_notify(${RUNS_CHANNEL}, ${lease.runId}::text) WHERE EXISTS (SELECT 1 FROM inserted)) AS notified`;
}

export interface ChildrenState {
  readonly fenced: boolean;
  /** Children of this run not finished yet (all of them belong to the current step). */
  readonly open: number;
  /** Children of this run that failed or were cancelled. */
  readonly failed: number;
  /** How many of this step's children exist (they are started in index order, a batch per commit). */
  readonly started: number;
}

export async function childrenState(
  db: Kysely<LedgerflowDatabase>,
  lease: Lease,
  stepName: string,
): Promise<ChildrenState> {
  const { rows } = await sql<{
    fenced: boolean;
    children_open: number;
    children_failed: number;
    last_index: number | null;
  }>`
    SELECT r.fencing_token = ${lease.fencingToken} AND r.status = 'running' AS fenced, r.children_open, r.children_failed,
           (SELECT c.parent_index FROM ledgerflow.workflow_run c
             WHERE c.parent_run_id = r.id AND c.parent_step = ${stepName}
             ORDER BY c.parent_index DESC LIMIT 1) AS last_index
      FROM ledgerflow.workflow_run r
     WHERE r.id = ${lease.runId}`.execute(db);
  const row = rows[0];
  return {
    fenced: row?.fenced === true,
    open: row?.children_open ?? 0,
    failed: row?.children_failed ?? 0,
    started: row?.last_index === null || row?.last_index === undefined ? 0 : row.last_index + 1,
  };
}

/** The first of the step's children that failed or was cancelled, with its error. */
export async function firstFailedChild(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  stepName: string,
): Promise<{ id: string; index: number; status: string; error: Json | null } | undefined> {
  const { rows } = await sql<{ id: string; parent_index: number; status: string; error: Json | null }>`
    SELECT id, parent_index, status, error FROM ledgerflow.workflow_run
     WHERE parent_run_id = ${runId} AND parent_step = ${stepName} AND status IN ('failed', 'cancelled')
     ORDER BY parent_index LIMIT 1`.execute(db);
  const row = rows[0];
  return row === undefined ? undefined : { id: row.id, index: row.parent_index, status: row.status, error: row.error };
}

/**
 * The step's children in item order, each with its index and its output of its last step
 * (`lastStep`). A pruned child has no row here: the caller compares the indexes with the items.
 */
export async function childResults(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  stepName: string,
  lastStep: string,
): Promise<Array<{ readonly index: number; readonly result: Json }>> {
  const { rows } = await sql<{ parent_index: number; result: Json | null }>`
    SELECT parent_index, output -> ${lastStep} AS result FROM ledgerflow.workflow_run
     WHERE parent_run_id = ${runId} AND parent_step = ${stepName}
     ORDER BY parent_index`.execute(db);
  return rows.map((r) => ({ index: r.parent_index, result: r.result ?? null }));
}

/** Children of `runId` that were pruned (run_archive, core 0019), of `workflowName` and with one of `keys`, by key. */
export async function prunedChildren(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  workflowName: string,
  keys: readonly string[],
): Promise<Array<{ readonly id: string; readonly key: string }>> {
  const rows = await db
    .selectFrom('ledgerflow.run_archive')
    .select(['id', 'dedupe_key'])
    .where('parent_run_id', '=', runId)
    .where('workflow_name', '=', workflowName)
    .where('dedupe_key', 'in', [...keys])
    .execute();
  return rows.map((r) => ({ id: r.id, key: r.dedupe_key! }));
}
