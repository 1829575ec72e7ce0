import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { CompensationReason, Json, LedgerflowDatabase, RunStatus } from '../store/tables.js';
import { millis } from '../store/millis.js';
import { LEASE_EXPIRED } from '../store/leased-run.js';
import { ofServedVersion, type WorkflowRegistry } from '../worker/registry.js';
import { countsTowardBudget, reconcileBackoffMs } from '../worker/retry.js';
import { recordableText } from '../worker/step-errors.js';
import { wakeAwaitingCompensationStatement } from '../worker/yield-commits.js';
import type { Lease } from '../worker/lease.js';
import {
  assertAttemptTransition,
  assertEffectTransition,
  assertRunTransition,
  ENDED_UNCOMPLETED_RUN_STATUSES,
  RECONCILER_CLAIMABLE_RUN_STATUSES,
  sqlStatusList,
} from '../store/state-machines.js';

/** The reconciler's own statements; recording a found effect on a live run reuses the worker's `advanceRun`. */

const ENDED_UNCOMPLETED_SQL = sqlStatusList(ENDED_UNCOMPLETED_RUN_STATUSES);
const RECONCILER_CLAIMABLE_SQL = sqlStatusList(RECONCILER_CLAIMABLE_RUN_STATUSES);

/** An open intent claimed for one lookup, with its run. */
export interface DueIntent {
  readonly run_id: string;
  readonly step_name: string;
  readonly idempotency_key: string;
  readonly request_hash: string;
  readonly attempt: number;
  readonly intent_at: Date;
  /** How many times the provider has been asked about it, this claim included. */
  readonly reconcile_attempts: number;
  readonly workflow_name: string;
  readonly workflow_version: number;
  readonly run_status: RunStatus;
  readonly current_step: number;
  /** Why the run is being compensated (core 0013); NULL while it is not. */
  readonly compensation: CompensationReason | null;
  readonly input: Json;
  /** The trace the run was started in (`workflow_run.trace_context`): the lookup's span continues it. */
  readonly trace_context: Json | null;
}

/** The intent a settling statement acts on: the attempt that wrote it guards against a re-taken one. */
export type IntentRef = Pick<DueIntent, 'run_id' | 'step_name' | 'idempotency_key' | 'attempt'>;

/**
 * Claims up to `limit` open intents that are due, oldest horizon first, for one lookup each, in
 * ONE statement: their `reconcile_after` moves one hold (`holdMs`) ahead and `reconcile_attempts`
 * goes up, so concurrent passes (every worker runs one) take disjoint intents (`SKIP LOCKED`) and
 * a pass that dies leaves them due again after the hold. Only intents some pass can act on:
 * - of a registered workflow version, past their horizon (`now`, default the database clock);
 * - whose run nobody holds (pending, parked, or running under an expired lease), at the
 *   intent's step and with a `reconcile` for it — or whose run is over (cancelled, failed), since
 *   an effect that may have happened must be settled and shown even then.
 * Reads `step_effect_open_intent_idx` (status = 'intent', by reconcile_after).
 */
export async function claimDueIntents(
  db: Kysely<LedgerflowDatabase>,
  registry: WorkflowRegistry,
  options: { readonly limit: number; readonly holdMs: number; readonly now: Date | undefined },
): Promise<DueIntent[]> {
  const { rows } = await claimDueIntentsStatement(registry, options).execute(db);
  return rows;
}

/** The statement of {@link claimDueIntents}. */
export function claimDueIntentsStatement(
  registry: WorkflowRegistry,
  options: { readonly limit: number; readonly holdMs: number; readonly now: Date | undefined },
): RawBuilder<DueIntent> {
  assertEffectTransition('intent', 'intent');
  const reconcilable = registry.all.flatMap((w) =>
    w.steps
      .filter((step) => w.reconciler(step.name) !== undefined)
      .map((step) => ({ name: w.name, version: w.version, step: step.name })),
  );
  const at = sql`COALESCE(${options.now ?? null}::timestamptz, statement_timestamp())`;
  return sql<DueIntent>`
    WITH due AS (
      SELECT e.workflow_id, e.step_name, e.idempotency_key
        FROM ledgerflow.step_effect e
        JOIN ledgerflow.workflow_run r ON r.id = e.workflow_id
       WHERE e.status = 'intent' AND e.kind = 'external' AND e.reconcile_after <= ${at}
         AND ${ofServedVersion(registry)}
         AND (
           r.status IN (${ENDED_UNCOMPLETED_SQL})
           -- A run being compensated: its steps' intents are settled in the ledger only (compensation.ts).
           OR (r.compensation IS NOT NULL AND EXISTS (
                 SELECT 1 FROM ledgerflow.workflow_step_def d
                  WHERE d.workflow_name = r.workflow_name AND d.version = r.workflow_version
                    AND d.step_name = e.step_name AND d.compensates IS NULL))
           OR ((r.status IN (${RECONCILER_CLAIMABLE_SQL}) OR (r.status = 'running' AND r.lease_expires_at <= ${at}))
               AND (r.workflow_name, r.workflow_version, e.step_name) IN (
                 SELECT * FROM unnest(${reconcilable.map((s) => s.name)}::text[], ${reconcilable.map((s) => s.version)}::int[],
                                      ${reconcilable.map((s) => s.step)}::text[])))
         )
       ORDER BY e.reconcile_after
       LIMIT ${options.limit}
         FOR NO KEY UPDATE OF e SKIP LOCKED
    ),
    claimed AS (
      UPDATE ledgerflow.step_effect e
         SET reconcile_after = statement_timestamp() + ${millis(options.holdMs)}, reconcile_attempts = e.reconcile_attempts + 1
        FROM due d
       WHERE e.workflow_id = d.workflow_id AND e.step_name = d.step_name AND e.idempotency_key = d.idempotency_key
      RETURNING e.workflow_id, e.step_name, e.idempotency_key, e.request_hash, e.attempt, e.intent_at, e.reconcile_attempts
    )
    SELECT c.workflow_id AS run_id, c.step_name, c.idempotency_key, c.request_hash, c.attempt, c.intent_at, c.reconcile_attempts,
           r.workflow_name, r.workflow_version, r.status AS run_status, r.current_step, r.input,
           r.trace_context, r.compensation
      FROM claimed c JOIN ledgerflow.workflow_run r ON r.id = c.workflow_id
     ORDER BY c.intent_at`;
}

/** An inconclusive lookup: the intent is asked about again after a backoff that doubles per lookup. */
export async function deferIntent(db: Kysely<LedgerflowDatabase>, intent: DueIntent, note: string): Promise<void> {
  await deferIntentStatement(intent, note).execute(db);
}

/** The statement of {@link deferIntent}. */
export function deferIntentStatement(intent: DueIntent, note: string): RawBuilder<unknown> {
  assertEffectTransition('intent', 'intent');
  const delayMs = reconcileBackoffMs(intent.reconcile_attempts);
  return sql`
    UPDATE ledgerflow.step_effect
       SET reconcile_after = statement_timestamp() + ${millis(delayMs)}, resolution = ${recordableText(note)}
     WHERE workflow_id = ${intent.run_id} AND step_name = ${intent.step_name} AND idempotency_key = ${intent.idempotency_key}
       AND status = 'intent' AND attempt = ${intent.attempt}`;
}

/**
 * Settles the intent of a run that is over (cancelled or failed): `found` records the effect
 * (output given) and `not_found` releases it — in the ledger only; the run stays as it is, but
 * for a compensating run parked until this intent is settled, which goes pending to decide. No
 * run lease is needed: nobody advances a finished run, and the intent claim keeps other passes off.
 */
export async function settleFinishedRunIntent(
  db: Kysely<LedgerflowDatabase>,
  intent: IntentRef,
  settlement:
    | { readonly output: Json; readonly resolution: string }
    | { readonly output?: undefined; readonly resolution: string },
): Promise<boolean> {
  // The settle and the wake of a compensation parked on this intent, in one transaction: the
  // wake is a statement of its own, so that it sees a park that committed while the settle
  // waited for the intent's row (yield-commits.ts, await-settlement).
  const settleAndWake = async (trx: Kysely<LedgerflowDatabase>): Promise<boolean> => {
    const { rows } = await settleFinishedRunIntentStatement(intent, settlement).execute(trx);
    if (rows.length !== 1) return false;
    await wakeAwaitingCompensationStatement(intent.run_id, intent.step_name).execute(trx);
    return true;
  };
  return db.isTransaction ? settleAndWake(db) : db.transaction().execute(settleAndWake);
}

/** The statement of {@link settleFinishedRunIntent}. */
export function settleFinishedRunIntentStatement(
  intent: IntentRef,
  settlement:
    | { readonly output: Json; readonly resolution: string }
    | { readonly output?: undefined; readonly resolution: string },
): RawBuilder<{ settled: boolean }> {
  const recording = settlement.output !== undefined;
  assertEffectTransition('intent', recording ? 'recorded' : 'released');
  return sql<{ settled: boolean }>`
    UPDATE ledgerflow.step_effect
       SET status = ${recording ? 'recorded' : 'released'}, reconcile_after = NULL, resolution = ${settlement.resolution},
           effect = COALESCE(${recording ? JSON.stringify(settlement.output) : null}::jsonb, effect),
           recorded_at = CASE WHEN ${recording}::boolean THEN statement_timestamp() ELSE recorded_at END
     WHERE workflow_id = ${intent.run_id} AND step_name = ${intent.step_name} AND idempotency_key = ${intent.idempotency_key}
       AND status = 'intent' AND attempt = ${intent.attempt}
       AND EXISTS (SELECT 1 FROM ledgerflow.workflow_run r WHERE r.id = ${intent.run_id}
                    AND (r.status IN (${ENDED_UNCOMPLETED_SQL}) OR r.compensation IS NOT NULL))
    RETURNING true AS settled`;
}

/** A live run the reconciler took over to act on its intent. */
export interface ReconcileClaim {
  readonly lease: Lease;
  readonly previousStatus: RunStatus;
  readonly previousError: Json | null;
  readonly outputs: Readonly<Record<string, Json>>;
  /** Failed attempts of the intent's step: the retry backoff after a `not_found`. */
  readonly failures: number;
}

/**
 * Takes a run whose intent is due for reconciliation the way a worker claims one — lock
 * without waiting, the next fencing token, any `running` attempt of a dead owner abandoned — so
 * that a zombie still holding the old token can commit nothing while the provider is asked.
 * Only runs that nobody holds: pending, parked, or running under an expired lease.
 */
export async function claimForReconcile(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  step: { readonly name: string; readonly position: number },
  reconcilerId: string,
  leaseMs: number,
): Promise<ReconcileClaim | undefined> {
  const { rows } = await claimForReconcileStatement(runId, step, reconcilerId, leaseMs).execute(db);
  const row = rows[0];
  if (row === undefined) return undefined;
  assertRunTransition(row.previous_status, 'running');
  return {
    lease: { runId, fencingToken: row.fencing_token, workerId: reconcilerId, leaseMs },
    previousStatus: row.previous_status,
    previousError: row.previous_error,
    outputs: row.outputs ?? {},
    failures: row.failures,
  };
}

/** The row {@link claimForReconcileStatement} returns. */
export interface ReconcileClaimRow {
  fencing_token: number;
  previous_status: RunStatus;
  previous_error: Json | null;
  outputs: Record<string, Json> | null;
  failures: number;
}

/** The statement of {@link claimForReconcile}. */
export function claimForReconcileStatement(
  runId: string,
  step: { readonly name: string; readonly position: number },
  reconcilerId: string,
  leaseMs: number,
): RawBuilder<ReconcileClaimRow> {
  for (const from of [...RECONCILER_CLAIMABLE_RUN_STATUSES, 'running'] as const) assertRunTransition(from, 'running');
  assertAttemptTransition('running', 'abandoned');
  return sql<ReconcileClaimRow>`
    WITH target AS (
      SELECT id, status AS previous_status, error AS previous_error
        FROM ledgerflow.workflow_run
       WHERE id = ${runId} AND current_step = ${step.position}
         AND (status IN (${RECONCILER_CLAIMABLE_SQL}) OR (status = 'running' AND lease_expires_at <= statement_timestamp()))
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    claimed AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running', lease_owner = ${reconcilerId}, lease_expires_at = statement_timestamp() + ${millis(leaseMs)},
             fencing_token = ledgerflow.next_fencing_token(r.fencing_token), updated_at = statement_timestamp()
        FROM target t
       WHERE r.id = t.id
      RETURNING r.fencing_token
    ),
    abandoned AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = jsonb_build_object('name', ${sql.lit(LEASE_EXPIRED)}, 'message', 'the run was taken over by the reconciler')
       WHERE run_id = ${runId} AND status = 'running' AND EXISTS (SELECT 1 FROM claimed)
      RETURNING 1
    )
    SELECT c.fencing_token, t.previous_status, t.previous_error,
           (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res
             WHERE res.run_id = ${runId} AND NOT res.skipped) AS outputs,
           (SELECT count(*) FROM ledgerflow.step_attempt a JOIN ledgerflow.workflow_run r ON r.id = a.run_id
             WHERE a.run_id = ${runId} AND a.step_name = ${step.name} AND a.status = 'failed'
               AND ${countsTowardBudget('a', 'r')})::int AS failures
      FROM claimed c, target t`;
}

/** What becomes of a run whose intent was not found: retried after a delay, or failed (its attempts were exhausted). */
export type AfterRelease = { readonly retryAfterMs: number } | { readonly failWith: Json };

/**
 * What a `not_found` means for the run `claim` took: pending again after `retryAfterMs` — or,
 * when it had been parked because its attempts were exhausted, failed with the last error, since
 * the effect is now known not to have happened.
 */
export function afterRelease(claim: ReconcileClaim, retryAfterMs: number): AfterRelease {
  const previous = claim.previousError as { exhausted?: boolean; lastError?: Json } | null;
  if (claim.previousStatus === 'needs_reconciliation' && previous?.exhausted === true) {
    return { failWith: previous.lastError ?? { name: 'Error', message: 'attempts exhausted' } };
  }
  return { retryAfterMs };
}

/** Written on an intent the reconciler released because the provider did not find it. */
export const RELEASED_NOT_FOUND = 'released by the reconciler: not found at the provider';

/**
 * `not_found`: the intent is released (the next attempt re-takes the same key) and the run goes
 * on as {@link afterRelease} decided, with `resolution` written on the intent.
 */
export async function releaseIntent(
  db: Kysely<LedgerflowDatabase>,
  claim: ReconcileClaim,
  intent: IntentRef,
  then: AfterRelease,
  resolution: string = RELEASED_NOT_FOUND,
): Promise<boolean> {
  const { rows } = await releaseIntentStatement(claim, intent, then, resolution).execute(db);
  return rows[0]?.released === true;
}

/** The statement of {@link releaseIntent}. */
export function releaseIntentStatement(
  claim: ReconcileClaim,
  intent: IntentRef,
  then: AfterRelease,
  resolution: string = RELEASED_NOT_FOUND,
): RawBuilder<{ released: boolean }> {
  assertEffectTransition('intent', 'released');
  if ('failWith' in then) {
    // Exhausted, and now known not to have happened: the step is over. A workflow with
    // compensations undoes what was recorded instead of failing (core 0013); a compensation that
    // is over ends the run compensation_failed. Decided from workflow_step_def, so the
    // reconciler and an operator's resolve agree without the workflow's code.
    for (const to of ['failed', 'pending', 'compensation_failed'] as const) assertRunTransition('running', to);
  } else {
    assertRunTransition('running', 'pending');
  }
  const { lease } = claim;
  const ends = sql`
    ends AS (
      SELECT min(d.position) FILTER (WHERE d.compensates IS NOT NULL) AS compensate_from,
             COALESCE(bool_or(d.step_name = ${intent.step_name} AND d.compensates IS NOT NULL), false) AS compensation_over
        FROM ledgerflow.workflow_run r
        JOIN ledgerflow.workflow_step_def d ON d.workflow_name = r.workflow_name AND d.version = r.workflow_version
       WHERE r.id = ${lease.runId}
    ),`;
  const fenced =
    'failWith' in then
      ? sql`
      UPDATE ledgerflow.workflow_run
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
             error = ${JSON.stringify(then.failWith)}::jsonb,
             status = CASE WHEN e.compensation_over THEN 'compensation_failed'
                           WHEN e.compensate_from IS NOT NULL THEN 'pending' ELSE 'failed' END,
             finished_at = CASE WHEN e.compensation_over OR e.compensate_from IS NULL THEN statement_timestamp() END,
             compensation = CASE WHEN NOT e.compensation_over AND e.compensate_from IS NOT NULL THEN 'failure' ELSE compensation END,
             current_step = CASE WHEN NOT e.compensation_over AND e.compensate_from IS NOT NULL THEN e.compensate_from ELSE current_step END,
             run_after = CASE WHEN NOT e.compensation_over AND e.compensate_from IS NOT NULL THEN statement_timestamp() ELSE run_after END
        FROM ends e`
      : sql`
      UPDATE ledgerflow.workflow_run
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
             status = 'pending', run_after = statement_timestamp() + ${millis(then.retryAfterMs)}, error = NULL`;
  return sql<{ released: boolean }>`
    WITH ${'failWith' in then ? ends : sql``} fenced AS (${fenced}
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
      RETURNING id
    ),
    released AS (
      UPDATE ledgerflow.step_effect
         SET status = 'released', reconcile_after = NULL, resolution = ${resolution}
       WHERE workflow_id = ${lease.runId} AND step_name = ${intent.step_name} AND idempotency_key = ${intent.idempotency_key}
         AND status = 'intent' AND attempt = ${intent.attempt} AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM released) AS released`;
}

/** `unknown` (or a reconcile that failed): park the run with the reason; the intent is asked about again after its backoff. */
export async function parkRun(db: Kysely<LedgerflowDatabase>, claim: ReconcileClaim, error: Json): Promise<boolean> {
  const { rows } = await parkRunStatement(claim, error).execute(db);
  return rows.length === 1;
}

/** The statement of {@link parkRun}. */
export function parkRunStatement(claim: ReconcileClaim, error: Json): RawBuilder<{ id: string }> {
  assertRunTransition('running', 'needs_reconciliation');
  const { lease } = claim;
  return sql<{ id: string }>`
    UPDATE ledgerflow.workflow_run
       SET status = 'needs_reconciliation', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
           error = ${JSON.stringify(error)}::jsonb
     WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
    RETURNING id`;
}

/** Gives a run the reconciler took back untouched (it could not act on it after all). */
export async function returnRun(db: Kysely<LedgerflowDatabase>, claim: ReconcileClaim): Promise<void> {
  await returnRunStatement(claim).execute(db);
}

/** The statement of {@link returnRun}. */
export function returnRunStatement(claim: ReconcileClaim): RawBuilder<unknown> {
  const back = claim.previousStatus === 'needs_reconciliation' ? 'needs_reconciliation' : 'pending';
  assertRunTransition('running', back);
  return sql`
    UPDATE ledgerflow.workflow_run
       SET status = ${back}, lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp()
     WHERE id = ${claim.lease.runId} AND fencing_token = ${claim.lease.fencingToken} AND status = 'running'`;
}
