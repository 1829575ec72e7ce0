import { sql, type Kysely, type Transaction } from 'kysely';
import type { AnyWorkflow, WorkflowStartInput } from '../../dsl/workflow.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import { RunNotFoundError, UnknownWorkflowError, ValidationError, WaitTimeoutError } from '../errors.js';
import type { Store } from '../store/store.js';
import { RUN_STATUSES, type LedgerflowDatabase, type RunStatus, type StepEffectRow, type WorkflowRunRow } from '../store/tables.js';
import { assertAttemptTransition, assertRunTransition } from '../worker/state-machines.js';
import { loadRunDetails, SETTLED_RUN_STATUSES, type RunDetails } from './run-details.js';
import { startRun, type MigratedVersions, type StartedRun, type StartOptions } from './start-run.js';
import { assertRunId } from './validate-input.js';
import { listWorkflowVersions, type WorkflowVersionSummary } from './workflow-versions.js';

export interface ClientOptions {
  readonly store: Store;
  /**
   * Workflows this client may start by name (the CLI does); plain workflows or worker
   * registrations. Starting with a workflow object works whether or not it is listed here.
   */
  readonly workflows?: ReadonlyArray<AnyWorkflow | WorkflowRegistration>;
}

export interface WaitOptions {
  /** Give up (WaitTimeoutError) after this long. Default 30 000. */
  readonly timeoutMs?: number;
  /** How often the run's status is read. Default 250. */
  readonly pollMs?: number;
}

export interface RunFilter {
  readonly status?: RunStatus | readonly RunStatus[];
  /** Workflow name. */
  readonly workflow?: string;
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
   * with another workflow or input throws `DuplicateRunError`.
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
  startInTransaction<DB>(trx: Transaction<DB>, workflowName: string, input: unknown, options?: StartOptions): Promise<StartedRun>;
  /** The run with its step results, attempts and ledger rows; `RunNotFoundError` if there is none. */
  getRun(runId: string): Promise<RunDetails>;
  /**
   * Polls until the run is completed, failed, cancelled or parked in `needs_reconciliation`,
   * then returns it; `WaitTimeoutError` after `timeoutMs`.
   *
   * @example
   * const run = await client.waitForRun(runId, { timeoutMs: 10_000 });
   * if (run.status === 'completed') console.log(run.output);
   */
  waitForRun(runId: string, options?: WaitOptions): Promise<RunDetails>;
  /**
   * Cancels a run that is not final yet: status `cancelled`, lease cleared and the fencing
   * token moved on, so a worker still executing one of its steps cannot commit. Returns
   * `false` when the run was already final. An open ledger intent is settled by the reconciler
   * once its horizon has passed (recorded if the provider applied it, released if not).
   */
  cancel(runId: string): Promise<boolean>;
  /** Runs, newest first. */
  listRuns(filter?: RunFilter): Promise<WorkflowRunRow[]>;
  /** Ledger rows, newest first. */
  listEffects(filter?: EffectFilter): Promise<StepEffectRow[]>;
  /** Every migrated workflow version with its runs counted by status (`ledgerflow versions`). */
  listVersions(): Promise<WorkflowVersionSummary[]>;
}

/** The statuses `cancel` takes a run from: every one with a transition into `cancelled` (state-machines.ts). */
const CANCELLABLE: readonly RunStatus[] = ['pending', 'running', 'needs_reconciliation'];

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
  const migrated: MigratedVersions = new Set();

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
      return startRun(store.db, resolve(workflow), input, startOptions, migrated);
    },
    async startInTransaction<DB>(trx: Transaction<DB>, workflow: AnyWorkflow | string, input: unknown, startOptions: StartOptions = {}) {
      if (!trx.isTransaction) {
        throw new TypeError(
          'startInTransaction needs a Kysely transaction (db.transaction().execute((trx) => client.startInTransaction(trx, …))); use start() otherwise.',
        );
      }
      // The caller's database type includes ours only in the tables the run writes; the queries name their schema.
      return startRun(trx as unknown as Kysely<LedgerflowDatabase>, resolve(workflow), input, startOptions, migrated);
    },
    getRun: (runId) => loadRunDetails(store.db, runId),
    async waitForRun(runId, waitOptions = {}) {
      assertRunId(runId);
      const timeoutMs = waitOptions.timeoutMs ?? 30_000;
      const pollMs = waitOptions.pollMs ?? 250;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const row = await store.db.selectFrom('ledgerflow.workflow_run').select('status').where('id', '=', runId).executeTakeFirst();
        if (row === undefined) throw new RunNotFoundError(`No run with id ${runId} in this database.`);
        if (SETTLED_RUN_STATUSES.includes(row.status)) return loadRunDetails(store.db, runId);
        if (Date.now() + pollMs > deadline) {
          throw new WaitTimeoutError(`Run ${runId} is still ${row.status} after ${timeoutMs} ms; it goes on, wait again or inspect it.`);
        }
        await new Promise((r) => setTimeout(r, pollMs));
      }
    },
    async cancel(runId) {
      assertRunId(runId);
      return store.db.transaction().execute(async (trx) => {
        const cancelled = await cancelRunStatement(trx, runId).executeTakeFirst();
        if (cancelled === undefined) {
          const exists = await trx.selectFrom('ledgerflow.workflow_run').select('id').where('id', '=', runId).executeTakeFirst();
          if (exists === undefined) throw new RunNotFoundError(`No run with id ${runId} in this database.`);
          return false;
        }
        // The worker that held the lease can no longer finish its attempt (fenced out).
        await cancelAttemptsStatement(trx, runId).execute();
        return true;
      });
    },
    async listRuns(filter = {}) {
      const statuses = filter.status === undefined ? [] : typeof filter.status === 'string' ? [filter.status] : filter.status;
      for (const status of statuses) {
        if (!RUN_STATUSES.includes(status)) {
          throw new ValidationError(`Unknown run status "${status}". Use one of: ${RUN_STATUSES.join(', ')}.`, [
            `status: unknown value ${status}`,
          ]);
        }
      }
      let query = store.db.selectFrom('ledgerflow.workflow_run').selectAll();
      if (statuses.length > 0) query = query.where('status', 'in', statuses);
      if (filter.workflow !== undefined) query = query.where('workflow_name', '=', filter.workflow);
      return query.orderBy('created_at', 'desc').orderBy('id').limit(checkLimit(filter.limit, 50)).execute();
    },
    listVersions: () => listWorkflowVersions(store.db),
    async listEffects(filter = {}) {
      if (filter.runId !== undefined) assertRunId(filter.runId);
      let query = store.db.selectFrom('ledgerflow.step_effect').selectAll();
      if (filter.pending !== undefined) query = query.where('status', filter.pending ? '=' : '<>', 'intent');
      if (filter.runId !== undefined) query = query.where('workflow_id', '=', filter.runId);
      return query
        .orderBy('intent_at', 'desc')
        .orderBy('workflow_id')
        .orderBy('step_name')
        .limit(checkLimit(filter.limit, 100))
        .execute();
    },
  };
}

/**
 * The first statement of {@link Client.cancel}: the run `cancelled` if it is not final yet, its
 * lease cleared and its fencing token moved on.
 */
export function cancelRunStatement(db: Kysely<LedgerflowDatabase>, runId: string) {
  for (const from of CANCELLABLE) assertRunTransition(from, 'cancelled');
  return db
    .updateTable('ledgerflow.workflow_run')
    .set({
      status: 'cancelled',
      finished_at: sql<Date>`now()`,
      updated_at: sql<Date>`now()`,
      lease_owner: null,
      lease_expires_at: null,
      fencing_token: sql<number>`fencing_token + 1`,
    })
    .where('id', '=', runId)
    .where('status', 'in', CANCELLABLE)
    .returning('id');
}

/** The second statement of {@link Client.cancel}: the cancelled run's open attempt `abandoned`. */
export function cancelAttemptsStatement(db: Kysely<LedgerflowDatabase>, runId: string) {
  assertAttemptTransition('running', 'abandoned');
  return db
    .updateTable('ledgerflow.step_attempt')
    .set({ status: 'abandoned', finished_at: sql<Date>`now()`, error: { name: 'Cancelled', message: 'the run was cancelled' } })
    .where('run_id', '=', runId)
    .where('status', '=', 'running');
}

function registerWorkflows(entries: ReadonlyArray<AnyWorkflow | WorkflowRegistration>): Map<string, AnyWorkflow> {
  const byName = new Map<string, AnyWorkflow>();
  for (const entry of entries) {
    const workflow = 'handlers' in entry ? entry.workflow : entry;
    const existing = byName.get(workflow.name);
    if (existing !== undefined && existing.version === workflow.version && existing !== workflow) {
      throw new TypeError(`Workflow "${workflow.name}" v${workflow.version} is registered twice with different definitions.`);
    }
    // By name, start() means the newest version; older ones keep running for runs pinned to them.
    if (existing === undefined || existing.version < workflow.version) byName.set(workflow.name, workflow);
  }
  return byName;
}

function checkLimit(limit: number | undefined, fallback: number): number {
  if (limit === undefined) return fallback;
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) {
    throw new ValidationError(`The limit must be an integer from 1 to 10000 (got ${limit}).`, [`limit: ${limit}`]);
  }
  return limit;
}
