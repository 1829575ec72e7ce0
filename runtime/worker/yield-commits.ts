import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import type { LedgerflowDatabase, RunStatus } from '../store/tables.js';
import { millis } from '../store/millis.js';
import { assertAttemptTransition, assertEffectTransition, assertRunTransition } from '../store/state-machines.js';
import { RUNS_CHANNEL } from '../store/channels.js';
import type { Lease } from './lease.js';
import { reconcileBackoffMs } from './retry.js';
import { recordableText } from './step-errors.js';

/*
 * A step's attempt that decides nothing about its step: it yields the run (commitYield) —
 * parked for the reconciler or a human (`needs_reconciliation`), rescheduled until an earlier
 * intent can be reconciled (`pending`), or a compensation parked until an intent it awaits is
 * settled (`await-settlement`) — and the wake of that parked compensation once it is. Fenced like
 * every commit (step-commits.ts): the run moves only `WHERE fencing_token = $token AND status =
 * 'running'`, and the attempt closes `abandoned` only with it. Stateless.
 */

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
function awaitSettlementStatement(
  p: YieldParams & { readonly to: Extract<YieldParams['to'], { kind: 'await-settlement' }> },
): RawBuilder<{ fenced: boolean }> {
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
