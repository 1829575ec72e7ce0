import { sql, type RawBuilder } from 'kysely';
import type { AttemptStatus, EffectStatus, FinalRunStatus, RunStatus } from './tables.js';

/*
 * The three status machines of the runtime — worker, reconciler and client — as data, with
 * assertions that every write calls before it builds its SQL (each `…Statement` function). The
 * SQL itself also guards each transition with `WHERE status = …`, so a transition the code did
 * not intend cannot happen silently. Same-status entries (`running -> running`, `intent ->
 * intent`) are writes that keep the status and change the row: a lease extended or taken over,
 * an intent re-taken or its next reconcile time moved. tests/runtime/state-machines.test.ts
 * checks that each statement asserts what it writes and that every entry below is used. They
 * live here, beside the statuses they move between (tables.ts), because the worker, the
 * reconciler and the client all write those statuses.
 *
 * Run (workflow_run.status). `fencing_token + 1` below is `ledgerflow.next_fencing_token`: one more,
 * and never below the floor of the server's WAL timeline (core 0023); a claimed insert's first
 * token is that function's too (1 on timeline 1), a deferred start's always 1.
 *   (a run is created `pending` by the client's start; client/start-run.ts)
 *   (none)   --a start for a worker of its own process with a slot free: inserted already claimed,
 *            leased to that worker, its first attempt opened (client/insert-run.ts, `claimedBy`)-->  running  (fencing_token 1)
 *   (none)   --a deferred start whose first commit is its completion (plain steps only): inserted with
 *            its attempts and results (client/insert-run.ts, `completion`)-->  completed  (fencing_token 1)
 *   pending  --a debounced start joins its open window (keep 'last': input and due time replaced),
 *            or finds the window over before any claim (debounce_open = false; client/debounce.ts)-->  pending
 *   pending  --claim (worker; fused into a completion; reconciler)-->  running  (fencing_token + 1)
 *   running  --step committed, lease held / lease renewed / intent commit extends it-->  running
 *   running (lease expired)  --claim by another owner (worker or reconciler), fencing_token + 1-->  running
 *   running  --step committed, lease released (worker stopping; reconciler recorded a found effect)-->  pending
 *   running  --last step committed-->  completed
 *   running  --retryable failure / intent not yet due / stop() / repeated-crash backoff-->  pending
 *   running  --reconciler: not found (retry) / gives a run back untouched-->  pending
 *   running  --exhausted, non-retryable, conflict, crash limit; reconciler: not found after exhaustion-->  failed
 *   running  --intent outcome unknown (reconcile: unknown, or exhausted with an open intent)-->  needs_reconciliation
 *   needs_reconciliation  --reconciler claims it-->  running
 *   running  --a sleep, waitFor, child or forEach step cannot finish yet (core 0003)-->  waiting
 *   waiting  --claim, once due (woken by an event or a settled child, timed out, or past its deadline)-->  running
 *   waiting  --woken: an event it waits for was sent, or one of its children settled (trigger)-->  waiting  (due now)
 *   running  --its deadline passed (the worker's deadline commit)-->  cancelled
 *   pending / running / waiting / needs_reconciliation  --client cancel, or the parent failed, was
 *            cancelled or compensated (trigger ledgerflow.run_settled), fencing_token + 1-->  cancelled
 *            (never a run that is compensating: see below)
 *   failed / cancelled  --an operator's retry (client.retryRun: due now, fencing_token + 1, a fresh
 *            attempt budget for the step it stopped at; client/operator/retry.ts)-->  pending
 *
 * Compensation (core 0013): a run whose steps declare compensations undoes its recorded effects
 * instead of failing. It is not a status of its own: the run is positioned at its first
 * compensation (after the steps) with `compensation` = why, and goes through pending and running
 * like any run — one claim path, the same fencing, retries, stop and crash take-over.
 *   running  --exhausted / non-retryable / crash limit (worker), not found after exhaustion (reconciler),
 *            or its deadline passed (the worker's deadline commit), with compensations declared-->  pending  (compensation = 'failure')
 *   pending / running / waiting / needs_reconciliation  --client cancel with compensate, fencing_token + 1-->  pending  (compensation = 'cancel')
 *   running  --last compensation committed (or skipped: its step's effect was not recorded)-->  compensated
 *   running  --a compensation exhausted, non-retryable, crash limit; reconciler: not found after exhaustion-->  compensation_failed
 *   running  --a compensation whose step's open intent lookups could not settle (worker/compensation.ts)-->  needs_reconciliation
 *            (`error.awaitedBy` = the compensation, `error.cause` = why it compensates)
 *   needs_reconciliation  --that intent settled by the reconciler or an operator's resolve (the settle's wake)-->  pending
 *   compensation_failed  --an operator's retry (client.retryRun; `compensation` kept: the failed
 *            compensation again with a fresh budget, then the remaining ones)-->  pending
 * completed and compensated are final; compensation_failed is final for the runtime and left
 * only by an operator's retry. A run that is compensating (`compensation` set, not final) leaves
 * compensation only by those two: nothing cancels it — the client's cancel and the deadline commit
 * skip it, so does the cascade of its parent's settling (core 0017), and the database refuses
 * `cancelled` with `compensation` set (`workflow_run_cancelled_compensation_check`). Runs an older
 * cascade had cancelled mid-compensation were set to compensation_failed by that migration, once:
 * a repair of data, not a transition of this machine.
 *
 * The header of core migration 0001_core.sql (applied and checksummed: it stays as it is) draws
 * the same run machine, cancel transitions included, with one transition missing and two
 * loose phrases: it has no `needs_reconciliation -> running` (the reconciler's claim); its
 * "running/pending --lease expired--> claimable again" is not a status change (an expired
 * `running` run stays `running` until a claim takes it: `running -> running` here); and its
 * "db now() + backoff" is `statement_timestamp()` + backoff in every statement (`now()` would be
 * the transaction's start). Its ledger machine lists `intent -> recorded`, `intent -> released`
 * and `released -> intent` only, and "intent --reconcile: not found--> released" holds for the
 * reconciler alone: a worker whose `reconcile` says not found re-takes the intent under the same
 * key (`intent -> intent`). The tables below are the complete list.
 *
 * Ledger (step_effect.status):
 *   (none)    --transactional: inserted by the step's own transaction (or its one-statement commit)-->  recorded
 *   (none)    --external: intent commit-->  intent
 *   intent    --result commit (perform returned, or reconcile found it; reconciler: found)-->  recorded
 *   intent    --same key re-taken (idempotentByKey retry, or reconcile: not found), or its reconcile_after moved-->  intent
 *   intent    --reconcile: not found / definitive refusal / failed before perform / exhausted with provider dedupe-->  released
 *   released  --a new attempt re-takes the same key and request-->  intent
 * recorded is final: referenced by step_result, never rewritten. (A transactional step's row is
 * inserted `recorded` and filled with its output by the same transaction's last statement —
 * `fill-recorded` — before anyone can see it: for everyone else that commit is `(none) -> recorded`.)
 * The database holds this too (core 0012): a trigger refuses any update of a recorded row whose
 * version another transaction wrote, and its deletion by any role but the retention role; a
 * finished attempt (any status but running) is likewise never updated.
 *
 * Attempt (step_attempt.status):
 *   (none)   --claim, or the previous step's commit under a held lease-->  running
 *   (none)   --a carried step, written by the run's next commit (worker/carried-prefix.ts)-->  succeeded
 *   running  --step committed-->  succeeded
 *   running  --handler/perform/validation failed-->  failed        (counts toward maxAttempts)
 *   running  --lease expired (`LeaseExpired`: the worker crashed or hung; claimed by a worker or the reconciler)-->  abandoned  (counts toward the crash limit)
 *   running  --worker stopped, intent not yet due, parked, run cancelled-->  abandoned  (does not count)
 *   running  --the step suspended the run (waiting)-->  suspended  (does not count)
 * The crash limit is max(maxAttempts, 5) per step (worker/retry.ts `crashLimit`); from a step's second
 * crash on, the claim opens no attempt and the run backs off, or fails (parks, with an open intent).
 */

/** Run transitions: from each status, the statuses a write may move it to. */
export const RUN_TRANSITIONS: Readonly<Record<RunStatus | 'none', readonly RunStatus[]>> = {
  none: ['running', 'completed'],
  pending: ['running', 'pending', 'cancelled'],
  running: [
    'running',
    'pending',
    'waiting',
    'completed',
    'failed',
    'needs_reconciliation',
    'cancelled',
    'compensated',
    'compensation_failed',
  ],
  waiting: ['running', 'waiting', 'cancelled', 'pending'],
  needs_reconciliation: ['running', 'cancelled', 'pending'],
  completed: [],
  failed: ['pending'],
  cancelled: ['pending'],
  compensated: [],
  compensation_failed: ['pending'],
};

/*
 * The run statuses the code asks about as a set, each written once here, beside the machine that
 * moves between them, and checked against it by tests/runtime/run-status-sets.test.ts. The final
 * ones are `FINAL_RUN_STATUSES` (tables.ts, beside `RUN_STATUSES`: the public list and the
 * schema's `finished_at` check); every other status is one a cancel takes a run from. An order
 * below is the order of the SQL text the list is rendered into ({@link sqlStatusList}), kept so
 * that the statements' snapshots do not change.
 */

/** Not final: the statuses a cancel takes a run from, into `cancelled` or (to compensate) `pending`. */
export const CANCELLABLE_RUN_STATUSES = [
  'pending',
  'running',
  'waiting',
  'needs_reconciliation',
] as const satisfies readonly RunStatus[];

/** The final statuses an operator's retry takes back to `pending` (client.retryRun); `completed` and `compensated` stay. */
export const RETRYABLE_RUN_STATUSES = [
  'failed',
  'cancelled',
  'compensation_failed',
] as const satisfies readonly FinalRunStatus[];

/**
 * The final statuses a retry takes a run from back to the step it stopped at, where a `child` or
 * `forEach` step reads its children again (client/operator/retry.ts; a `compensation_failed` run
 * resumes its compensations, which read no children). Children of such a run stay while it does
 * (retention/run-prune-statements.ts).
 */
export const CHILDREN_READ_ON_RETRY: readonly FinalRunStatus[] = ['failed', 'cancelled'];

/**
 * Final but not `completed`: a run that ended without its result. Nobody advances it any more, so
 * its open intents are settled in the ledger only (the reconciler; an operator's resolve), and a
 * parent counts such a child as failed (core 0003, 0013: `children_failed`).
 */
export const ENDED_UNCOMPLETED_RUN_STATUSES = [
  'cancelled',
  'failed',
  'compensated',
  'compensation_failed',
] as const satisfies readonly FinalRunStatus[];

/**
 * Where a run waits for nobody but a person or the reconciler, so `waitForRun` returns: the final
 * statuses plus `needs_reconciliation` (parked, visible, not retried). A run that compensates is
 * not settled until it is `compensated` or `compensation_failed` (core 0013's trigger notifies for
 * both).
 */
export const SETTLED_RUN_STATUSES = [
  'completed',
  'failed',
  'cancelled',
  'needs_reconciliation',
  'compensated',
  'compensation_failed',
] as const satisfies readonly RunStatus[];

/** A status in which `waitForRun` returns ({@link SETTLED_RUN_STATUSES}). */
export type SettledRunStatus = (typeof SETTLED_RUN_STATUSES)[number];

/** A worker's claim takes a run in these once its `run_after` is due (the predicate of the partial index workflow_run_due_idx, core 0003). */
export const DUE_RUN_STATUSES = ['pending', 'waiting'] as const satisfies readonly RunStatus[];

/** The reconciler takes a run whose intent is due in these, and a `running` one only under an expired lease (reconciler/reconcile-commits.ts). */
export const RECONCILER_CLAIMABLE_RUN_STATUSES = [
  'pending',
  'needs_reconciliation',
] as const satisfies readonly RunStatus[];

/** Whether `status` is one of `statuses` (a set above, or `FINAL_RUN_STATUSES`), narrowing it. */
export function runStatusIn<S extends RunStatus>(statuses: readonly S[], status: RunStatus): status is S {
  return (statuses as readonly RunStatus[]).includes(status);
}

/**
 * A status set as a literal SQL list (`'pending', 'waiting'`), for `status IN (…)`: a literal, not
 * parameters, so that the planner matches it to a partial index (workflow_run_due_idx,
 * workflow_run_finished_idx) and a prepared statement's text stays the same. Statuses are
 * identifiers of the schema's checks, never user input; anything else is refused.
 */
export function sqlStatusList(statuses: readonly string[]): RawBuilder<unknown> {
  if (statuses.length === 0) throw new RangeError('sqlStatusList: an empty status list');
  for (const status of statuses) {
    if (!/^[a-z_]+$/.test(status)) throw new RangeError(`sqlStatusList: "${status}" is not a status`);
  }
  return sql.raw(statuses.map((s) => `'${s}'`).join(', '));
}

export const EFFECT_TRANSITIONS: Readonly<Record<EffectStatus | 'none', readonly EffectStatus[]>> = {
  none: ['intent', 'recorded'],
  intent: ['recorded', 'intent', 'released'],
  released: ['intent'],
  recorded: [],
};

export const ATTEMPT_TRANSITIONS: Readonly<Record<AttemptStatus | 'none', readonly AttemptStatus[]>> = {
  none: ['running', 'succeeded'],
  running: ['succeeded', 'failed', 'abandoned', 'suspended'],
  succeeded: [],
  failed: [],
  abandoned: [],
  suspended: [],
};

export class IllegalTransitionError extends Error {
  override readonly name = 'IllegalTransitionError';
}

export function assertRunTransition(from: RunStatus | 'none', to: RunStatus): void {
  if (!RUN_TRANSITIONS[from].includes(to)) {
    throw new IllegalTransitionError(`Illegal run transition ${from} -> ${to}`);
  }
}

export function assertEffectTransition(from: EffectStatus | 'none', to: EffectStatus): void {
  if (!EFFECT_TRANSITIONS[from].includes(to)) {
    throw new IllegalTransitionError(`Illegal ledger transition ${from} -> ${to}`);
  }
}

export function assertAttemptTransition(from: AttemptStatus | 'none', to: AttemptStatus): void {
  if (!ATTEMPT_TRANSITIONS[from].includes(to)) {
    throw new IllegalTransitionError(`Illegal attempt transition ${from} -> ${to}`);
  }
}
