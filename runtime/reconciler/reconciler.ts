import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { z } from 'zod';
import type { ReconcileOutcome } from '../contracts/handler-types.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import type { Store } from '../store/store.js';
import type { Json, RunStatus } from '../store/tables.js';
import { buildRegistry, type RegisteredWorkflow } from '../worker/registry.js';
import { advanceRun } from '../worker/step-commits.js';
import { serializeError } from '../worker/step-errors.js';
import { claimForReconcile, parkRun, releaseIntent } from './reconcile-commits.js';

/**
 * The reconciler: resolves `external` intents that a crashed or timed-out attempt left behind.
 * Runs inside every worker (every `reconcileIntervalMs`) and as `ledgerflow reconcile`.
 *
 * An intent is due once `intent_at + lease + performTimeoutMs` has passed in DATABASE time:
 * by then the attempt that wrote it either performed within its lease and was cut off by its
 * perform timeout, or never started performing (a worker checks that before calling out), so
 * asking the provider cannot race the original call. For each due intent whose run nobody
 * holds (pending, parked in `needs_reconciliation`, or running under an expired lease), the
 * pass takes the run with a new fencing token and asks the step's `reconcile({ key, intent })`:
 *   found      → ledger `recorded`, step result, run advanced (pending, or completed);
 *   not_found  → ledger `released`, run pending: the next attempt performs with the same key
 *                (a run parked because its attempts were exhausted fails instead);
 *   unknown    → run parked in `needs_reconciliation` with the reason (asked again next pass).
 * A reconcile that throws, or returns an invalid output, parks the run with that reason.
 */
export interface ReconcilePassOptions {
  readonly store: Store;
  readonly workflows: readonly WorkflowRegistration[];
  /** Treat this as the database's current time when deciding which intents are due (tests, operators). */
  readonly now?: Date;
  /** The workers' lease; part of the due time. Default 30 000. Use the same value as the workers. */
  readonly leaseMs?: number;
  /** Written as `lease_owner` while a run is being reconciled. */
  readonly reconcilerId?: string;
  /** Open intents examined per pass, oldest first. Default 100. */
  readonly limit?: number;
}

export type ReconcileItemOutcome = 'recorded' | 'released' | 'parked' | 'skipped';

export interface ReconcileItem {
  readonly runId: string;
  readonly workflow: string;
  readonly step: string;
  readonly key: string;
  /** The attempt that wrote the intent. */
  readonly intentAttempt: number;
  readonly outcome: ReconcileItemOutcome;
  readonly detail: string;
}

export interface ReconcileReport {
  readonly examined: number;
  /** found at the provider and recorded */
  readonly recorded: number;
  /** not found: released for a same-key retry */
  readonly released: number;
  readonly parked: number;
  readonly skipped: number;
  readonly items: readonly ReconcileItem[];
}

const DEFAULT_LEASE_MS = 30_000;

interface OpenIntentRow {
  run_id: string;
  step_name: string;
  idempotency_key: string;
  request_hash: string;
  attempt: number;
  intent_at: Date;
  workflow_name: string;
  workflow_version: number;
  status: RunStatus;
  current_step: number;
  lease_expires_at: Date | null;
  input: Json;
  db_now: Date;
}

/**
 * One reconciliation pass over the open intents of the given workflows.
 *
 * @example
 * const report = await runReconcilePass({ store, workflows: [orderPaymentRegistration] });
 * console.log(`${report.recorded} recorded, ${report.released} released, ${report.parked} parked`);
 */
export async function runReconcilePass(options: ReconcilePassOptions): Promise<ReconcileReport> {
  const { store } = options;
  const registry = buildRegistry(options.workflows);
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const reconcilerId = options.reconcilerId ?? `reconciler:${randomUUID()}`;
  const items: ReconcileItem[] = [];
  if (registry.all.length === 0) return summarize(items);

  const { rows } = await sql<OpenIntentRow>`
    SELECT e.workflow_id AS run_id, e.step_name, e.idempotency_key, e.request_hash, e.attempt, e.intent_at,
           r.workflow_name, r.workflow_version, r.status, r.current_step, r.lease_expires_at, r.input,
           COALESCE(${options.now ?? null}::timestamptz, now()) AS db_now
      FROM ledgerflow.step_effect e
      JOIN ledgerflow.workflow_run r ON r.id = e.workflow_id
      JOIN unnest(${registry.names}::text[], ${registry.versions}::int[]) AS w(name, version)
        ON r.workflow_name = w.name AND r.workflow_version = w.version
     WHERE e.status = 'intent' AND e.kind = 'external'
     ORDER BY e.intent_at
     LIMIT ${options.limit ?? 100}`.execute(store.db);

  for (const row of rows) {
    items.push(await reconcileOne(options, registry.get(row.workflow_name, row.workflow_version)!, row, leaseMs, reconcilerId));
  }
  return summarize(items);
}

async function reconcileOne(
  options: ReconcilePassOptions,
  workflow: RegisteredWorkflow,
  row: OpenIntentRow,
  leaseMs: number,
  reconcilerId: string,
): Promise<ReconcileItem> {
  const item = (outcome: ReconcileItemOutcome, detail: string): ReconcileItem => ({
    runId: row.run_id,
    workflow: `${row.workflow_name}@${row.workflow_version}`,
    step: row.step_name,
    key: row.idempotency_key,
    intentAttempt: row.attempt,
    outcome,
    detail,
  });
  const step = workflow.steps.find((s) => s.name === row.step_name);
  if (step === undefined) return item('skipped', 'the step is not part of this workflow version');
  const dueAt = new Date(row.intent_at).getTime() + leaseMs + step.performTimeoutMs;
  if (dueAt > new Date(row.db_now).getTime()) {
    return item('skipped', `not due before ${new Date(dueAt).toISOString()} (intent_at + lease + perform timeout)`);
  }
  if (row.status !== 'pending' && row.status !== 'running' && row.status !== 'needs_reconciliation') {
    return item('skipped', `the run is ${row.status}; its intent is left for an operator`);
  }
  if (row.status === 'running' && row.lease_expires_at !== null && new Date(row.lease_expires_at) > new Date(row.db_now)) {
    return item('skipped', 'the run is held by a live worker, which reconciles its own intents');
  }
  if (row.current_step !== step.position) return item('skipped', `the run is at step ${row.current_step}, not at this intent's step`);
  const reconcile = workflow.reconciler(step.name);
  if (reconcile === undefined) {
    return item('skipped', 'the step has no reconcile; it is idempotentByKey, so a worker retries with the same key');
  }

  const claim = await claimForReconcile(options.store.db, row.run_id, step.position, reconcilerId, leaseMs);
  if (claim === undefined) return item('skipped', 'another worker or reconciler took the run first');

  const parkWith = async (reason: string): Promise<ReconcileItem> => {
    const previous = claim.previousError as { exhausted?: boolean; lastError?: Json } | null;
    const parked = await parkRun(options.store.db, claim, {
      name: 'NeedsReconciliation',
      message: reason,
      step: step.name,
      key: row.idempotency_key,
      exhausted: previous?.exhausted === true,
      ...(previous?.lastError !== undefined ? { lastError: previous.lastError } : {}),
    });
    return item(parked ? 'parked' : 'skipped', parked ? reason : 'lost the run while parking it');
  };

  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error('reconcile took longer than the lease')), leaseMs);
  let outcome: ReconcileOutcome<unknown>;
  try {
    outcome = await reconcile({
      runId: row.run_id,
      workflowName: row.workflow_name,
      stepName: step.name,
      attempt: row.attempt,
      input: row.input,
      steps: claim.outputs,
      signal: controller.signal,
      key: row.idempotency_key,
      intent: { attempt: row.attempt, intentAt: new Date(row.intent_at), requestHash: row.request_hash },
    });
  } catch (error) {
    return parkWith(`reconcile threw: ${serializeError(error).message}`);
  } finally {
    clearTimeout(timer);
  }

  switch (outcome?.status) {
    case 'found': {
      const parsed = (step.output as z.ZodType).safeParse(outcome.output);
      if (!parsed.success) return parkWith(`reconcile found the effect but its output is invalid: ${parsed.error.message}`);
      const output = JSON.parse(JSON.stringify(parsed.data)) as Json;
      const next = workflow.steps[step.position + 1];
      const result = await advanceRun(options.store.db, {
        lease: claim.lease,
        workflowName: row.workflow_name,
        workflowVersion: row.workflow_version,
        step,
        attempt: undefined,
        resultAttempt: row.attempt,
        output,
        effect: { key: row.idempotency_key, record: { from: 'intent', attempt: row.attempt, resolution: 'found by the reconciler' } },
        continuation: next === undefined ? { kind: 'complete', runOutput: { ...claim.outputs, [step.name]: output } } : { kind: 'release' },
      });
      return result.fenced
        ? item('recorded', next === undefined ? 'found at the provider; run completed' : 'found at the provider; run continues')
        : item('skipped', 'lost the run while recording');
    }
    case 'not_found': {
      const previous = claim.previousError as { exhausted?: boolean; lastError?: Json } | null;
      const exhausted = claim.previousStatus === 'needs_reconciliation' && previous?.exhausted === true;
      const released = await releaseIntent(
        options.store.db,
        claim,
        step.name,
        row.idempotency_key,
        row.attempt,
        exhausted ? (previous?.lastError ?? { name: 'Error', message: 'attempts exhausted' }) : undefined,
      );
      if (!released) return item('skipped', 'the intent changed while the provider was asked');
      return item('released', exhausted ? 'not found at the provider; attempts were exhausted, so the run failed' : 'not found at the provider; the next attempt performs with the same key');
    }
    case 'unknown':
      return parkWith(`reconcile could not tell: ${outcome.reason}`);
    default:
      return parkWith('reconcile returned neither found, not_found nor unknown');
  }
}

function summarize(items: ReconcileItem[]): ReconcileReport {
  const count = (outcome: ReconcileItemOutcome): number => items.filter((i) => i.outcome === outcome).length;
  return {
    examined: items.length,
    recorded: count('recorded'),
    released: count('released'),
    parked: count('parked'),
    skipped: count('skipped'),
    items,
  };
}

