/*
 * The client (`createClient`): what an application calls to start runs, wait for them, send
 * events, act as an operator and read the three records. Each operation lives in its own module of
 * this folder (start-run.ts, wait-for-run.ts, send-event.ts, run-list.ts, operator/, …); this file
 * is the `Client` interface and the one place that wires those operations to a store.
 *
 * Long because `Client` is the public surface of the client, each method with its documentation
 * and an example, and `createClient` implements all of it over one store, telemetry and registry.
 */

import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { z } from 'zod';
import { checkOptions, integer, rule } from '../../dsl/option-checks.js';
import type { AnyEvent, EventSendPayload } from '../../dsl/event.js';
import type { AnyWorkflow, WorkflowStartInput } from '../../dsl/workflow.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import { UnknownWorkflowError, ValidationError } from '../errors.js';
import type { Store } from '../store/store.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import { loadTelemetry } from '../telemetry/otel-telemetry.js';
import {
  RUN_STATUSES,
  type LedgerflowDatabase,
  type OperatorActionRow,
  type RunStatus,
  type StepEffectRow,
  type WorkflowRunRow,
} from '../store/tables.js';
import { loadRunDetails, type RunDetails, type SettledRun } from './run-details.js';
import { listQueues, type QueueListOptions, type QueueSummary } from './queues.js';
import { PayloadLimitsCache } from '../limits/limits-cache.js';
import { parseEvent, sendEventIn, sendSignal, signalKey, type SendEventOptions, type SentEvent } from './send-event.js';
import { listSchedules, type ScheduleSummary } from './schedules.js';
import { startRun, type MigratedVersions, type StartedRun, type StartOptions } from './start-run.js';
import { listAudit, type AuditFilter } from './operator/audit.js';
import { cancelRun, type CancelOptions } from './operator/cancel.js';
import type { OperatorNote } from './operator/operator-action.js';
import { setQueuePaused, setSchedulePaused } from './operator/pause.js';
import { resolveEffect, workflowVersions, type EffectResolution, type ResolvedEffect } from './operator/resolve.js';
import { retryRun, type RetriedRun } from './operator/retry.js';
import { assertRunId } from './validate-input.js';
import { invalidOption } from './invalid-option.js';
import { listRunRows, type RunListFilter } from './run-list.js';
import { listWorkflowVersions, type WorkflowVersionSummary } from './workflow-versions.js';
import { SettledRunWaiters } from './settled-run-waiters.js';
import type { Worker } from '../worker/worker.js';
import { localStartsOf, type LocalStarts } from './local-starts.js';
import { parseWaitOptions, waitForRun, type WaitOptions } from './wait-for-run.js';

export type { WaitOptions } from './wait-for-run.js';

export interface ClientOptions {
  readonly store: Store;
  /**
   * Workflows this client may start by name (the CLI does); plain workflows or worker
   * registrations. Starting with a workflow object works whether or not it is listed here.
   */
  readonly workflows?: ReadonlyArray<AnyWorkflow | WorkflowRegistration>;
  /**
   * A worker of this process, created over the same `store`. A run that `start` or `startAndWait`
   * creates, of a workflow version this worker serves, is claimed for it in the start's own
   * transaction when it has a slot free (the claim statement restricted to that run): one
   * durable commit instead of two, no NOTIFY, and the worker drives the run at once. Without a
   * free slot (or once it stops) starts NOTIFY the workers as usual.
   *
   * @example
   * const worker = createWorker({ store, workflows: [orderPaymentHandlers(handlers)] });
   * const client = createClient({ store, worker });
   */
  readonly worker?: Worker;
}

export interface RunFilter {
  readonly status?: RunStatus | readonly RunStatus[];
  /** Workflow name. */
  readonly workflow?: string;
  /** Only the children of this run (started by its `child`/`forEach` steps). */
  readonly parentRunId?: string;
  /** Only the run started with this dedupe key (one per workflow; with `workflow`, at most one). */
  readonly dedupeKey?: string;
  /** Newest first; default 50, at most 10 000. */
  readonly limit?: number;
}

export interface EffectFilter {
  /** `true`: open intents only (an external call may be in flight or unresolved); `false`: all others. */
  readonly pending?: boolean;
  readonly runId?: string;
  /** Newest first; default 100, at most 10 000. */
  readonly limit?: number;
}

/** Starts runs and reads their three records. Holds no connection of its own beyond the store's. */
export interface Client {
  readonly store: Store;
  /**
   * Validates `input` with the workflow's schema (nothing is written when it fails) and creates
   * a pending run, waking idle workers at commit. Idempotent: the same `runId`, or the same
   * `dedupeKey` for this workflow, returns the existing run with `created: false`; reusing them
   * with another workflow or input throws `DuplicateRunError` (another input is accepted with
   * `onDifferentInput: 'return-existing'`). With `debounce`, the starts of one key within a
   * window share one run, due when the window ends (`StartOptions.debounce`).
   *
   * @example
   * const { runId } = await client.start(orderPayment, { orderId: 'o-1', amountCents: 1200 }, { dedupeKey: 'o-1' });
   */
  start<W extends AnyWorkflow>(workflow: W, input: WorkflowStartInput<W>, options?: StartOptions): Promise<StartedRun>;
  /** By name: the newest registered version of that workflow. */
  start(workflowName: string, input: unknown, options?: StartOptions): Promise<StartedRun>;
  /**
   * `start` inside the caller's own Kysely transaction: the run exists if and only if that
   * transaction commits, and workers are woken at its commit. On PGlite the transaction must
   * come from `store.db` (one connection); on PostgreSQL any Kysely on the same database works.
   *
   * @example
   * await db.transaction().execute(async (trx) => {
   *   await trx.insertInto('orders').values(order).execute();
   *   await client.startInTransaction(trx, orderPayment, { orderId: order.id, amountCents: order.total });
   * });
   */
  startInTransaction<DB, W extends AnyWorkflow>(
    trx: Transaction<DB>,
    workflow: W,
    input: WorkflowStartInput<W>,
    options?: StartOptions,
  ): Promise<StartedRun>;
  startInTransaction<DB>(
    trx: Transaction<DB>,
    workflowName: string,
    input: unknown,
    options?: StartOptions,
  ): Promise<StartedRun>;
  /**
   * The run with its step results, attempts and ledger rows; `RunNotFoundError` if there is none,
   * `RunPrunedError` (with what the archive keeps: status, times) if it finished and was pruned.
   */
  getRun(runId: string): Promise<RunDetails>;
  /**
   * Waits until the run is completed, failed, cancelled, compensated, compensation_failed or
   * parked in `needs_reconciliation`, then returns how it ended (`SettledRun`: id, workflow,
   * status, output, error; `getRun` has its steps, attempts and ledger rows); `WaitTimeoutError`
   * after `timeoutMs`; `RunPrunedError` for a pruned run. Woken by a notification from the
   * transaction that settles the run (the wait marks the run so that it notifies; unwatched runs
   * never do), with a status read every `recheckMs` in case one is lost, and every `pollMs` while
   * the client's listening connection is down. A run completed or failed by the client's own
   * worker (`createClient({ store, worker })`) is answered in-process, from what its settling
   * commit wrote, without a statement.
   *
   * @example
   * const run = await client.waitForRun(runId, { timeoutMs: 10_000 });
   * if (run.status === 'completed') console.log(run.output);
   */
  waitForRun(runId: string, options?: WaitOptions): Promise<SettledRun>;
  /**
   * `start`, then `waitForRun` — what an API handler that answers with the result does. The run
   * is inserted already marked as waited for, so the wait adds no statement before it sleeps
   * until the run's settling commit notifies. With the worker of this process
   * (`createClient({ store, worker })`), a run the start claims for that worker is inserted
   * unmarked (its settle notifies nobody) and the wait is answered in-process when that worker
   * completes or fails it: the start's commit and the run's own, nothing more. Should the run
   * leave that worker unsettled, the wait marks it then and goes on as above. `options.wait` are the wait's options (its
   * `timeoutMs` bounds the wait; the start's own `timeoutMs` is the run's deadline). A start that
   * finds an existing run (same `runId`/`dedupeKey`, a debounce window) waits for that run.
   *
   * @example
   * const run = await client.startAndWait(orderPayment, { orderId: 'o-1', amountCents: 1200 }, { dedupeKey: 'o-1', wait: { timeoutMs: 5_000 } });
   * if (run.status === 'completed') console.log(run.output);
   */
  startAndWait<W extends AnyWorkflow>(
    workflow: W,
    input: WorkflowStartInput<W>,
    options?: StartAndWaitOptions,
  ): Promise<SettledRun>;
  startAndWait(workflowName: string, input: unknown, options?: StartAndWaitOptions): Promise<SettledRun>;
  /**
   * Cancels a run that is not final yet: status `cancelled`, lease cleared and the fencing
   * token moved on, so a worker still executing one of its steps cannot commit; its unfinished
   * children are cancelled with it, and so on down (a child that is compensating is left to finish
   * its compensation), and its waits end. Returns `false` when the run was already final. An open ledger intent is settled by the reconciler once its horizon
   * has passed (recorded if the provider applied it, released if not). With a note (`actor` and
   * `reason`), the cancel and its audit row (`listAudit`) commit together.
   *
   * With `compensate: true` (default: the workflow's `compensateOnCancel`), a run whose workflow
   * declares compensations undoes its recorded effects instead: it is compensating, then
   * `compensated` (or `compensation_failed`). A run already being compensated is not cancelled,
   * with or without `compensate`: nothing is written, not even the audit row, and the result is
   * `false` (read the run to tell it from a final one: `compensation` set, status not final); it
   * goes on undoing its effects to `compensated` or `compensation_failed`.
   *
   * @example
   * await client.cancel(runId, { compensate: true, actor: 'ops@example.com', reason: 'customer withdrew' });
   */
  cancel(runId: string, options?: CancelOptions): Promise<boolean>;
  /** Runs, newest first (runs created at the same instant: by id, descending); a `dedupeKey` lookup, by id. The dashboard's runs list is the same query. */
  listRuns(filter?: RunFilter): Promise<WorkflowRunRow[]>;
  /** Ledger rows, newest first. */
  listEffects(filter?: EffectFilter): Promise<StepEffectRow[]>;
  /** Every migrated workflow version with its runs counted by status (`ledgerflow versions`). */
  listVersions(): Promise<WorkflowVersionSummary[]>;
  /**
   * Every queue workers registered, by name: its limits, the slots held now, the runs in line and
   * since when the oldest waits (`ledgerflow queues`); with `partitions`, the same per partition,
   * those in line first in the order they will be served, at most `partitionLimit` (20) per queue.
   *
   * @example
   * for (const q of await client.listQueues({ partitions: true })) {
   *   console.log(q.name, q.inFlight, q.waiting, q.oldestWaitingSince, q.partitions?.map((p) => p.partition));
   * }
   */
  listQueues(options?: QueueListOptions): Promise<QueueSummary[]>;
  /**
   * Every schedule workers registered, by name, with its next `ticks` ticks (default 3), its last
   * tick and run, and the error of a tick that could not start (`ledgerflow schedules`).
   */
  listSchedules(options?: { readonly ticks?: number }): Promise<ScheduleSummary[]>;
  /**
   * Pauses a schedule: no tick starts a run until `resumeSchedule`. Workers that register it
   * again leave it paused. `false` when it was paused already; `ScheduleNotFoundError` if no
   * worker registered it.
   *
   * @example
   * await client.pauseSchedule('nightly-backfill');
   */
  pauseSchedule(name: string, note?: OperatorNote): Promise<boolean>;
  /** Resumes a paused schedule from its next tick after now (ticks that fell while paused start nothing). `false` when it was not paused. */
  resumeSchedule(name: string, note?: OperatorNote): Promise<boolean>;
  /**
   * Retries a `failed` or `cancelled` run from the step it stopped at, with a fresh attempt budget
   * for that step: every recorded effect and checkpointed result is reused, never performed again;
   * an open intent stays open and is taken over or reconciled by the next attempt as usual. The run
   * becomes `pending`, due now; a deadline that has passed is dropped. Refused (`ConflictError`,
   * nothing written) for a run in any other status, for a child whose parent is not over yet, and
   * for a run with failed or cancelled children (retry those first). Audited.
   *
   * @example
   * const { fromStep } = await client.retryRun(runId, { actor: 'ana', reason: 'card processor fixed (INC-42)' });
   */
  retryRun(runId: string, note: OperatorNote): Promise<RetriedRun>;
  /**
   * Settles the open intent of `stepName` by hand, as the reconciler would for the same answer:
   * `found` records the effect with that output (validated with the step's output schema; the
   * client must know the run's workflow version) and advances the run; `notFound` releases the key,
   * so the step performs again under the same key when the run goes on. A failed or cancelled run's
   * intent is settled in the ledger only. Refused (`ConflictError`) when there is no open intent or
   * a worker holds the run under a live lease. Audited.
   *
   * @example
   * await client.resolveEffect(runId, 'charge', { found: { chargeId: 'ch_81' } }, { actor: 'ana', reason: 'seen in the PSP dashboard' });
   */
  resolveEffect(
    runId: string,
    stepName: string,
    resolution: EffectResolution,
    note: OperatorNote,
  ): Promise<ResolvedEffect>;
  /**
   * Pauses a queue: no slot of it is granted until `resumeQueue` (runs in line wait; slots held are
   * kept until given back). Workers registering the queue leave it paused. `false` when it was
   * paused already; `QueueNotFoundError` if no worker registered it.
   */
  pauseQueue(name: string, note?: OperatorNote): Promise<boolean>;
  /** Resumes a paused queue, granting at once what its limits allow. `false` when it was not paused. */
  resumeQueue(name: string, note?: OperatorNote): Promise<boolean>;
  /** The audit trail of operator actions, newest first (`ledgerflow audit`). */
  listAudit(filter?: AuditFilter): Promise<OperatorActionRow[]>;
  /**
   * Stores an event for the steps that wait for it (`.waitFor` with this event and a `match`
   * equal to `key`) and wakes those already waiting. The payload is validated first (nothing is
   * written when it fails). An event nobody waits for yet is kept until a step takes it; each
   * event is taken by one step, once. Idempotent by `dedupeKey`.
   *
   * @example
   * await client.sendEvent(paymentSettled, 'o-1', { orderId: 'o-1', paid: true }, { dedupeKey: 'psp-evt-981' });
   */
  sendEvent<E extends AnyEvent>(
    event: E,
    key: string,
    payload: EventSendPayload<E>,
    options?: SendEventOptions,
  ): Promise<SentEvent>;
  /** By name: an event some workflow registered with this client waits for (the CLI does this). */
  sendEvent(eventName: string, key: string, payload: unknown, options?: SendEventOptions): Promise<SentEvent>;
  /**
   * `sendEvent` inside the caller's own Kysely transaction: the event exists, and waiting runs
   * are woken, if and only if that transaction commits (same rules as `startInTransaction`).
   */
  sendEventInTransaction<DB, E extends AnyEvent>(
    trx: Transaction<DB>,
    event: E,
    key: string,
    payload: EventSendPayload<E>,
    options?: SendEventOptions,
  ): Promise<SentEvent>;
  /**
   * Sends `event` to one run you know: the steps of that run that wait for `event` without a
   * `match` take it. `RunNotFoundError` if there is no such run; `ConflictError` (nothing sent)
   * if it is already completed, failed or cancelled.
   *
   * @example
   * await client.signal(runId, approval, { approvedBy: 'ops@example.com' });
   */
  signal<E extends AnyEvent>(
    runId: string,
    event: E,
    payload: EventSendPayload<E>,
    options?: SendEventOptions,
  ): Promise<SentEvent>;
  signal(runId: string, eventName: string, payload: unknown, options?: SendEventOptions): Promise<SentEvent>;
}

/** {@link Client.startAndWait}'s options: the start's, and the wait's under `wait`. */
export interface StartAndWaitOptions extends StartOptions {
  readonly wait?: WaitOptions;
}

/**
 * Creates a client over a store.
 *
 * @example
 * const store = await openStore();
 * const client = createClient({ store, workflows: [orderPayment] });
 * const { runId, created } = await client.start('order-payment', { orderId: 'o-1', amountCents: 1200 });
 */
export function createClient(options: ClientOptions): Client {
  const { store } = options;
  const byName = registerWorkflows(options.workflows ?? []);
  const events = registerEvents(byName);
  const migrated: MigratedVersions = new Set();
  const limits = new PayloadLimitsCache(store.db);
  const versions = workflowVersions(options.workflows ?? []);
  // The OpenTelemetry API, loaded at the first start: a run continues the trace it was started in.
  let telemetry: Promise<Telemetry> | undefined;
  const traceContext = async () => (await (telemetry ??= loadTelemetry())).captureContext();
  // One LISTEN for every wait of this client, opened at the first (settled-run-waiters.ts).
  const settled = new SettledRunWaiters(store);
  const local = localWorker(options);

  const resolveEvent = (event: AnyEvent | string): AnyEvent => {
    if (typeof event !== 'string') return event;
    const found = events.get(event);
    if (found === undefined) {
      const known = [...events.keys()].sort();
      throw new UnknownWorkflowError(
        `Unknown event "${event}". ${known.length > 0 ? `Events the registered workflows wait for: ${known.join(', ')}.` : 'No registered workflow waits for an event.'}`,
      );
    }
    return found;
  };
  const send = async (
    trx: Kysely<LedgerflowDatabase> | undefined,
    event: AnyEvent,
    key: string,
    payload: unknown,
    sendOptions: SendEventOptions,
  ) => {
    const json = await parseEvent(event, key, payload, sendOptions, limits, trx);
    if (trx !== undefined) return sendEventIn(trx, event, key, json, sendOptions);
    return store.db.transaction().execute((own) => sendEventIn(own, event, key, json, sendOptions));
  };

  const resolve = (workflow: AnyWorkflow | string): AnyWorkflow => {
    if (typeof workflow !== 'string') return workflow;
    const found = byName.get(workflow);
    if (found === undefined) {
      const known = [...byName.keys()].sort();
      throw new UnknownWorkflowError(
        `Unknown workflow "${workflow}". ${known.length > 0 ? `Registered: ${known.join(', ')}.` : 'No workflows are registered with this client.'}`,
      );
    }
    return found;
  };

  return {
    store,
    async start(workflow: AnyWorkflow | string, input: unknown, startOptions: StartOptions = {}) {
      return startRun(
        store.db,
        resolve(workflow),
        input,
        startOptions,
        migrated,
        limits,
        await traceContext(),
        undefined,
        local,
      );
    },
    async startInTransaction<DB>(
      trx: Transaction<DB>,
      workflow: AnyWorkflow | string,
      input: unknown,
      startOptions: StartOptions = {},
    ) {
      if (!trx.isTransaction) {
        throw new TypeError(
          'startInTransaction needs a Kysely transaction (db.transaction().execute((trx) => client.startInTransaction(trx, …))); use start() otherwise.',
        );
      }
      // The caller's database type includes ours only in the tables the run writes; the queries name their schema.
      return startRun(
        trx as unknown as Kysely<LedgerflowDatabase>,
        resolve(workflow),
        input,
        startOptions,
        migrated,
        limits,
        await traceContext(),
      );
    },
    getRun: (runId) => loadRunDetails(store.db, runId),
    waitForRun: async (runId, waitOptions) =>
      waitForRun(store.db, settled, runId, parseWaitOptions(waitOptions), local?.waiters),
    async startAndWait(workflow: AnyWorkflow | string, input: unknown, options: StartAndWaitOptions = {}) {
      const { wait, ...startOptions } = options;
      const parsedWait = parseWaitOptions(wait);
      const resolved = resolve(workflow);
      const context = await traceContext();
      const runId = startOptions.runId?.toLowerCase() ?? randomUUID();
      return waitForRun(store.db, settled, runId, parsedWait, local?.waiters, () =>
        startRun(store.db, resolved, input, startOptions, migrated, limits, context, { runId }, local),
      );
    },
    cancel: (runId, note) => cancelRun(store.db, runId, note),
    listRuns: async (filter = {}) => listRuns(store.db, filter),
    listVersions: () => listWorkflowVersions(store.db),
    listQueues: (listOptions) => listQueues(store.db, listOptions),
    listSchedules: async (listOptions = {}) => listSchedules(store.db, checkTicks(listOptions)),
    pauseSchedule: (name, note) => setSchedulePaused(store.db, name, true, note),
    resumeSchedule: (name, note) => setSchedulePaused(store.db, name, false, note),
    retryRun: (runId, note) => retryRun(store.db, runId, note),
    resolveEffect: (runId, stepName, resolution, note) =>
      resolveEffect(store.db, versions, limits, runId, stepName, resolution, note),
    pauseQueue: (name, note) => setQueuePaused(store.db, name, true, note),
    resumeQueue: (name, note) => setQueuePaused(store.db, name, false, note),
    listAudit: async (filter = {}) => listAudit(store.db, filter, checkLimit(filter, 50)),
    sendEvent: (event: AnyEvent | string, key: string, payload: unknown, sendOptions: SendEventOptions = {}) =>
      send(undefined, resolveEvent(event), key, payload, sendOptions),
    async sendEventInTransaction<DB>(
      trx: Transaction<DB>,
      event: AnyEvent,
      key: string,
      payload: unknown,
      sendOptions: SendEventOptions = {},
    ) {
      if (!trx.isTransaction) {
        throw new TypeError(
          'sendEventInTransaction needs a Kysely transaction (db.transaction().execute((trx) => client.sendEventInTransaction(trx, …))); use sendEvent() otherwise.',
        );
      }
      return send(trx as unknown as Kysely<LedgerflowDatabase>, event, key, payload, sendOptions);
    },
    async signal(runId: string, event: AnyEvent | string, payload: unknown, sendOptions: SendEventOptions = {}) {
      assertRunId(runId);
      const resolved = resolveEvent(event);
      const json = await parseEvent(resolved, signalKey(runId), payload, sendOptions, limits);
      return sendSignal(store.db, runId, resolved, json, sendOptions);
    },
    async listEffects(filter = {}) {
      if (filter.runId !== undefined) assertRunId(filter.runId);
      let query = store.db.selectFrom('ledgerflow.step_effect').selectAll();
      if (filter.pending !== undefined) query = query.where('status', filter.pending ? '=' : '<>', 'intent');
      if (filter.runId !== undefined) query = query.where('workflow_id', '=', filter.runId);
      return query
        .orderBy('intent_at', 'desc')
        .orderBy('workflow_id')
        .orderBy('step_name')
        .limit(checkLimit(filter, 100))
        .execute();
    },
  };
}

/**
 * {@link Client.listRuns}: the filter validated, then the one run list the dashboard reads too
 * (client/run-list.ts), newest first (`created_at`, then `id`, both descending); a dedupe key is
 * looked up in the byte-order key index (core 0010), its runs in id order.
 */
export function listRuns(db: Kysely<LedgerflowDatabase>, filter: RunFilter): Promise<WorkflowRunRow[]> {
  const statuses =
    filter.status === undefined ? [] : typeof filter.status === 'string' ? [filter.status] : filter.status;
  for (const status of statuses) {
    if (!RUN_STATUSES.includes(status)) {
      throw new ValidationError(`Unknown run status "${status}". Use one of: ${RUN_STATUSES.join(', ')}.`, [
        `status: unknown value ${status}`,
      ]);
    }
  }
  if (filter.parentRunId !== undefined) assertRunId(filter.parentRunId);
  const limit = checkLimit(filter, 50);
  const listed: RunListFilter = {
    statuses,
    ...(filter.workflow !== undefined ? { workflow: filter.workflow } : {}),
    ...(filter.parentRunId !== undefined ? { parentRunId: filter.parentRunId } : {}),
    ...(filter.dedupeKey !== undefined ? { dedupeKey: { value: filter.dedupeKey, match: 'exact' } } : {}),
  };
  return listRunRows(db, listed, limit);
}

/** The local-start hook of `options.worker`, checked to share the client's store. */
function localWorker(options: ClientOptions): LocalStarts | undefined {
  if (options.worker === undefined) return undefined;
  const local = localStartsOf(options.worker);
  if (local === undefined) throw new TypeError('createClient: worker must be a worker made by createWorker().');
  if (local.store !== options.store) {
    throw new TypeError(
      'createClient: the worker was created over another store; pass the same store to createWorker and createClient (a start inserts its run already claimed for the worker).',
    );
  }
  return local;
}

function registerWorkflows(entries: ReadonlyArray<AnyWorkflow | WorkflowRegistration>): Map<string, AnyWorkflow> {
  const byName = new Map<string, AnyWorkflow>();
  for (const entry of entries) {
    const workflow = 'handlers' in entry ? entry.workflow : entry;
    const existing = byName.get(workflow.name);
    if (existing !== undefined && existing.version === workflow.version && existing !== workflow) {
      throw new TypeError(
        `Workflow "${workflow.name}" v${workflow.version} is registered twice with different definitions.`,
      );
    }
    // By name, start() means the newest version; older ones keep running for runs pinned to them.
    if (existing === undefined || existing.version < workflow.version) byName.set(workflow.name, workflow);
  }
  return byName;
}

/** The events the registered workflows wait for, by name; one definition per name. */
function registerEvents(workflows: ReadonlyMap<string, AnyWorkflow>): Map<string, AnyEvent> {
  const events = new Map<string, AnyEvent>();
  const visit = (workflow: AnyWorkflow, seen: Set<AnyWorkflow>): void => {
    if (seen.has(workflow)) return;
    seen.add(workflow);
    for (const step of workflow.steps) {
      if (step.wait !== undefined) {
        const existing = events.get(step.wait.event.name);
        if (existing !== undefined && existing !== step.wait.event) {
          throw new TypeError(
            `Event "${step.wait.event.name}" is declared twice with different schemas; declare each event once and import it.`,
          );
        }
        events.set(step.wait.event.name, step.wait.event);
      }
      if (step.fanOut !== undefined) visit(step.fanOut.workflow, seen);
    }
  };
  const seen = new Set<AnyWorkflow>();
  for (const workflow of workflows.values()) visit(workflow, seen);
  return events;
}

const ticksSchema = z.object({ ticks: rule(integer().min(0).max(100), 'must be an integer from 0 to 100').optional() });

const limitSchema = z.object({
  limit: rule(integer().min(1).max(10_000), 'must be an integer from 1 to 10000').optional(),
});

function checkTicks(options: { readonly ticks?: number }): number {
  checkOptions(ticksSchema, options, invalidOption);
  return options.ticks ?? 3;
}

function checkLimit(options: { readonly limit?: number }, fallback: number): number {
  checkOptions(limitSchema, options, invalidOption);
  return options.limit ?? fallback;
}
