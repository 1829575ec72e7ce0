import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { ReconcileOutcome } from '../contracts/handler-types.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import type { Store } from '../store/store.js';
import type { StepDefinition } from '../../dsl/workflow.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import { ENDED_UNCOMPLETED_RUN_STATUSES, runStatusIn } from '../store/state-machines.js';
import { describeIssues } from '../client/validate-input.js';
import { PayloadLimitsCache } from '../limits/limits-cache.js';
import { checkRecordedOutput } from '../limits/recorded-output.js';
import type { ReconcileItem, ReconcileItemOutcome, ReconcileReport } from './reconcile-report.js';
import type { Telemetry, TelemetryOptions } from '../telemetry/telemetry.js';
import { loadWorkerTelemetry } from '../telemetry/otel-telemetry.js';
import {
  buildRegistry,
  compensationOf,
  nextStepOf,
  settledByKey,
  type RegisteredWorkflow,
} from '../worker/registry.js';
import { backoffDelayMs } from '../worker/retry.js';
import { advanceRun } from '../worker/step-commits.js';
import { serializeError } from '../worker/step-errors.js';
import {
  afterRelease,
  claimDueIntents,
  claimForReconcile,
  deferIntent,
  parkRun,
  releaseIntent,
  returnRun,
  settleFinishedRunIntent,
  type DueIntent,
  type ReconcileClaim,
} from './reconcile-commits.js';

/*
 * The reconciler: resolves `external` intents whose outcome is unknown — left by a crashed
 * worker, a perform that threw or timed out, a run that was cancelled or failed meanwhile.
 * Runs inside every worker (every `reconcileIntervalMs`) and as `ledgerflow reconcile`.
 *
 * An intent is due once its horizon has passed — `reconcile_after`, stored by the worker that
 * wrote it (intent time + its lease + the step's perform timeout, database time): by then the
 * attempt either performed within its lease and was cut off by its perform timeout, or never
 * started performing (a worker checks that before calling out), so asking the provider cannot
 * race the original call. A pass claims due intents in pages, each for ONE lookup (concurrent
 * passes take disjoint intents), and asks the step's `reconcile({ key, intent })`:
 *
 * for a run nobody holds (pending, parked, running under an expired lease), taken over with a
 * new fencing token:
 *   found      → ledger `recorded`, step result, run advanced (pending, or completed);
 *   not_found  → ledger `released`, run pending after the step's retry backoff: the next attempt
 *                performs with the same key (a run parked because its attempts were exhausted
 *                fails instead);
 *   unknown    → run parked in `needs_reconciliation` with the reason;
 * for a run that is over (cancelled, failed), in the ledger only:
 *   found → `recorded` (the effect happened: shown, never silently open); not_found → `released`.
 * An inconclusive lookup (unknown, a reconcile that throws, or a found output that cannot be
 * recorded — refused by the step's schema, over the output size limit or not JSON: the check
 * every path applies, limits/recorded-output.ts) is asked again after a backoff stored on the
 * intent (5 s, doubling, at most 10 min); a live run parks meanwhile, as the worker's own lookup
 * leaves it. One item's error never stops the pass.
 */

/** What one reconcile pass works on, and how. */
export interface ReconcilePassOptions {
  readonly store: Store;
  readonly workflows: readonly WorkflowRegistration[];
  /** Treat this as the database's current time when deciding which intents are due (tests, operators). */
  readonly now?: Date;
  /**
   * How long the pass holds a run it took over, and an intent it is asking about (then both are
   * free again if the pass died). Default 30 000; the lookup itself is bounded by it too.
   */
  readonly leaseMs?: number;
  /** Written as `lease_owner` while a run is being reconciled. */
  readonly reconcilerId?: string;
  /** Intents claimed per page. Default 100. */
  readonly limit?: number;
  /** At most this many intents per pass (the rest wait for the next). Default 10 000. */
  readonly maxItems?: number;
  /**
   * Where the lookups' spans and counts go (as `WorkerOptions.telemetry`). Each lookup's span
   * continues the trace its run was started in.
   */
  readonly telemetry?: TelemetryOptions;
}

const DEFAULT_LEASE_MS = 30_000;

/**
 * One reconciliation pass over the due intents of the given workflows.
 *
 * @example
 * const report = await runReconcilePass({ store, workflows: [orderPaymentRegistration] });
 * console.log(`${report.recorded} recorded, ${report.released} released, ${report.parked} parked`);
 */
export async function runReconcilePass(options: ReconcilePassOptions, loaded?: Telemetry): Promise<ReconcileReport> {
  const { store } = options;
  const registry = buildRegistry(options.workflows);
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const reconcilerId = options.reconcilerId ?? `reconciler:${randomUUID()}`;
  const pageSize = options.limit ?? 100;
  const maxItems = options.maxItems ?? 10_000;
  const items: ReconcileItem[] = [];
  if (registry.all.length === 0) return summarize(items);
  // A worker's pass uses the telemetry the worker loaded (`loaded`).
  const telemetry = loaded ?? (await loadWorkerTelemetry(options.telemetry));
  // Read once, and only when a lookup finds an output to check.
  const limits = new PayloadLimitsCache(store.db);
  for (;;) {
    const limit = Math.min(pageSize, maxItems - items.length);
    if (limit <= 0) break;
    const due = await claimDueIntents(store.db, registry, { limit, holdMs: leaseMs, now: options.now });
    for (const intent of due) {
      const workflow = registry.get(intent.workflow_name, intent.workflow_version)!;
      items.push(await reconcileOne(options, telemetry, limits, workflow, intent, leaseMs, reconcilerId));
    }
    if (due.length < limit) break;
  }
  return summarize(items);
}

async function reconcileOne(
  options: ReconcilePassOptions,
  telemetry: Telemetry,
  limits: PayloadLimitsCache,
  workflow: RegisteredWorkflow,
  intent: DueIntent,
  leaseMs: number,
  reconcilerId: string,
): Promise<ReconcileItem> {
  const item = (outcome: ReconcileItemOutcome, detail: string): ReconcileItem => ({
    runId: intent.run_id,
    workflow: `${intent.workflow_name}@${intent.workflow_version}`,
    step: intent.step_name,
    key: intent.idempotency_key,
    intentAttempt: intent.attempt,
    outcome,
    detail,
  });
  const db = options.store.db;
  try {
    const step = workflow.steps.find((s) => s.name === intent.step_name);
    if (step === undefined) return item('skipped', 'the step is not part of this workflow version');
    // A run being compensated settles its steps' intents in the ledger only, like a finished run:
    // its compensations decide on what the ledger then says (worker/compensation.ts).
    const finished =
      runStatusIn(ENDED_UNCOMPLETED_RUN_STATUSES, intent.run_status) ||
      (intent.compensation !== null && step.compensates === undefined);
    const lookup: Lookup = (outputs) => ask(telemetry, limits, workflow, step, intent, outputs, leaseMs);
    const compensation = intent.compensation !== null ? compensationOf(workflow, step.name) : undefined;
    if (compensation !== undefined && settledByKey(workflow, step)) {
      // Nothing can look it up, and releasing it would make its compensation skip an effect that
      // may have happened: the compensation takes it over by key (worker/compensation.ts).
      const note = `left open for compensation "${compensation.name}": the step has no reconcile and its provider dedupes by key, so the compensation sends the key again to learn whether the effect happened`;
      await deferIntent(db, intent, note);
      return item('deferred', note);
    }
    if (finished) return await settleFinishedRun(db, workflow, step, intent, lookup, item);
    if (intent.current_step !== step.position) {
      await deferIntent(
        db,
        intent,
        `not reconciled: the run is at step ${intent.current_step}, not at this intent's step`,
      );
      return item('skipped', `the run is at step ${intent.current_step}, not at this intent's step`);
    }
    const claim = await claimForReconcile(db, intent.run_id, step, reconcilerId, leaseMs);
    if (claim === undefined) return item('skipped', 'another worker or reconciler took the run first');
    try {
      return await settleLiveRun(db, workflow, step, intent, claim, lookup, item);
    } catch (error) {
      // Whatever failed, the run must not stay leased to this pass until the lease runs out.
      await returnRun(db, claim).catch(() => {});
      throw error;
    }
  } catch (error) {
    return item('error', `could not be settled: ${serializeError(error).message}; it is due again after ${leaseMs} ms`);
  }
}

type ItemOf = (outcome: ReconcileItemOutcome, detail: string) => ReconcileItem;

type Answer =
  | { readonly status: 'found'; readonly output: Json }
  | { readonly status: 'not_found' }
  | { readonly status: 'inconclusive'; readonly reason: string };

/** The item's lookup, given the outputs of the run's earlier steps. */
type Lookup = (outputs: Readonly<Record<string, Json>>) => Promise<Answer>;

/** Asks the step's `reconcile`, bounded by the lease: the outcome, or why there is none. */
async function ask(
  telemetry: Telemetry,
  limits: PayloadLimitsCache,
  workflow: RegisteredWorkflow,
  step: StepDefinition,
  intent: DueIntent,
  outputs: Readonly<Record<string, Json>>,
  leaseMs: number,
): Promise<Answer> {
  const reconcile = workflow.reconciler(step.name);
  if (reconcile === undefined) return { status: 'inconclusive', reason: 'the step has no reconcile' };
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error('reconcile took longer than the lease')), leaseMs);
  let outcome: ReconcileOutcome<unknown>;
  try {
    const subject = {
      runId: intent.run_id,
      workflow: intent.workflow_name,
      workflowVersion: intent.workflow_version,
      step: step.name,
      key: intent.idempotency_key,
      intentAttempt: intent.attempt,
      by: 'pass',
      traceContext: intent.trace_context,
    } as const;
    outcome = await telemetry.reconcile(subject, () =>
      reconcile({
        runId: intent.run_id,
        workflowName: intent.workflow_name,
        stepName: step.name,
        attempt: intent.attempt,
        input: intent.input,
        steps: outputs,
        signal: controller.signal,
        key: intent.idempotency_key,
        intent: { attempt: intent.attempt, intentAt: new Date(intent.intent_at), requestHash: intent.request_hash },
      }),
    );
  } catch (error) {
    return { status: 'inconclusive', reason: `reconcile threw: ${serializeError(error).message}` };
  } finally {
    clearTimeout(timer);
  }
  switch (outcome?.status) {
    case 'found': {
      // Held to what the worker holds it to: an output that cannot be recorded is not recorded.
      const checked = checkRecordedOutput(step, intent.workflow_name, outcome.output, await limits.current());
      if (checked.ok) return { status: 'found', output: checked.output };
      const why =
        checked.problem === 'schema'
          ? `is invalid: ${describeIssues(checked.issues).join('; ')}`
          : checked.problem === 'too-large'
            ? `cannot be recorded: ${checked.error.message}`
            : `cannot be stored as JSON: ${checked.reason}`;
      return { status: 'inconclusive', reason: `reconcile found the effect but its output ${why}` };
    }
    case 'not_found':
      return { status: 'not_found' };
    case 'unknown':
      return { status: 'inconclusive', reason: `reconcile could not tell: ${outcome.reason}` };
    default:
      return { status: 'inconclusive', reason: 'reconcile returned neither found, not_found nor unknown' };
  }
}

/** A cancelled or failed run: the effect is settled in the ledger; the run stays as it is. */
async function settleFinishedRun(
  db: Kysely<LedgerflowDatabase>,
  workflow: RegisteredWorkflow,
  step: StepDefinition,
  intent: DueIntent,
  lookup: Lookup,
  item: ItemOf,
): Promise<ReconcileItem> {
  const was = `the run is ${intent.run_status}`;
  if (workflow.reconciler(step.name) === undefined) {
    // idempotentByKey without reconcile: nobody can look it up, and the run will not retry.
    const resolution = `released unresolved: ${was} and the step has no reconcile; the provider dedupes by key, so a later call with this key gets the original result`;
    const settled = await settleFinishedRunIntent(db, intent, { resolution });
    return settled ? item('released', resolution) : item('skipped', 'the intent changed meanwhile');
  }
  const answer = await lookup(await stepOutputs(db, intent.run_id));
  if (answer.status === 'inconclusive') {
    await deferIntent(db, intent, `unresolved (${was}): ${answer.reason}`);
    return item('deferred', answer.reason);
  }
  const settled =
    answer.status === 'found'
      ? await settleFinishedRunIntent(db, intent, {
          output: answer.output,
          resolution: `found by the reconciler after ${was}`,
        })
      : await settleFinishedRunIntent(db, intent, {
          resolution: `released by the reconciler after ${was}: not found at the provider`,
        });
  if (!settled) return item('skipped', 'the intent changed meanwhile');
  return answer.status === 'found'
    ? item('recorded', `found at the provider; recorded (${was}, it stays so)`)
    : item('released', `not found at the provider; released (${was})`);
}

/** A run nobody held, now taken over by this pass (`claim`). */
async function settleLiveRun(
  db: Kysely<LedgerflowDatabase>,
  workflow: RegisteredWorkflow,
  step: StepDefinition,
  intent: DueIntent,
  claim: ReconcileClaim,
  lookup: Lookup,
  item: ItemOf,
): Promise<ReconcileItem> {
  const previous = claim.previousError as { exhausted?: boolean; lastError?: Json } | null;
  const answer = await lookup(claim.outputs);
  switch (answer.status) {
    case 'found': {
      const next = nextStepOf(workflow, step);
      const result = await advanceRun(db, {
        lease: claim.lease,
        workflowName: intent.workflow_name,
        workflowVersion: intent.workflow_version,
        step,
        attempt: undefined,
        resultAttempt: intent.attempt,
        output: answer.output,
        effect: {
          key: intent.idempotency_key,
          mode: 'record-intent',
          attempt: intent.attempt,
          resolution: 'found by the reconciler',
        },
        continuation:
          next === undefined
            ? {
                kind: 'complete',
                runOutput: { ...claim.outputs, [step.name]: answer.output },
                ...(step.compensates !== undefined ? { compensated: true } : {}),
              }
            : { kind: 'release' },
      });
      return result.fenced
        ? item(
            'recorded',
            next === undefined ? 'found at the provider; run completed' : 'found at the provider; run continues',
          )
        : item('skipped', 'lost the run while recording');
    }
    case 'not_found': {
      const then = afterRelease(claim, backoffDelayMs(step.retry, Math.max(1, claim.failures)));
      const exhausted = 'failWith' in then;
      const released = await releaseIntent(db, claim, intent, then);
      if (!released) return item('skipped', 'the intent changed while the provider was asked');
      return item(
        'released',
        exhausted
          ? 'not found at the provider; attempts were exhausted, so the run failed'
          : 'not found at the provider; the next attempt performs with the same key after the retry backoff',
      );
    }
    case 'inconclusive': {
      const parked = await parkRun(db, claim, {
        name: 'NeedsReconciliation',
        message: answer.reason,
        step: step.name,
        key: intent.idempotency_key,
        exhausted: previous?.exhausted === true,
        ...(previous?.lastError !== undefined ? { lastError: previous.lastError } : {}),
      });
      if (!parked) return item('skipped', 'lost the run while parking it');
      await deferIntent(db, intent, `parked: ${answer.reason}`);
      return item('parked', answer.reason);
    }
  }
}

async function stepOutputs(db: Kysely<LedgerflowDatabase>, runId: string): Promise<Record<string, Json>> {
  const rows = await db
    .selectFrom('ledgerflow.step_result')
    .select(['step_name', 'output'])
    .where('run_id', '=', runId)
    .execute();
  return Object.fromEntries(rows.map((r) => [r.step_name, r.output]));
}

function summarize(items: ReconcileItem[]): ReconcileReport {
  const count = (outcome: ReconcileItemOutcome): number => items.filter((i) => i.outcome === outcome).length;
  return {
    examined: items.length,
    recorded: count('recorded'),
    released: count('released'),
    parked: count('parked'),
    deferred: count('deferred'),
    skipped: count('skipped'),
    errors: count('error'),
    items,
  };
}
