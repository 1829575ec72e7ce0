/**
 * The worker: its life cycle, the runs it drives (its flights), and the parts it is made of.
 *
 * Life cycle (`#state`):
 *
 *   idle ──start()──▶ starting ──registrations verified──▶ running ──stop()──▶ stopping ──▶ stopped
 *   starting ──verification fails──▶ idle   (start() rejects; nothing was started)
 *   idle | starting ──stop()──▶ stopped      (nothing to wind down)
 *
 * starting: verifies every registration against its migrated version, registers the schedules
 * it was given (an upsert; refused if a schedule's workflow is not migrated), then subscribes to
 * {@link RUNS_CHANNEL} (a subscription that is refused is retried; it does not fail start()).
 * running: the lease keeper renews, the reconcile timer ticks, the schedule timer starts the runs
 * of due cron ticks, and the claim loop claims and launches flights. stopping: in this order — the
 * reconcile and schedule ticks and the claim loop end, the subscription closes; in-flight steps
 * get up to `timeoutMs` (default one lease) to commit and give their runs back, the rest are
 * aborted and released; runs a fused claim took meanwhile are released; the lease keeper stops; a
 * reconcile or schedule pass in progress is awaited.
 *
 * The parts, each in its own module with its states documented there:
 *   runs-subscription.ts  LISTEN on RUNS_CHANNEL, a wake-up hint for the claim loop, and its recovery
 *   claim-loop.ts         claims (polled, woken, or fused into completion commits), orphan adoption
 *   lease-keeper.ts       heartbeat renewals and the local watchdog over the flights' leases
 *   reconcile-timer.ts    this worker's periodic reconcile passes
 *   schedule-timer.ts     this worker's tick loop: runs of due schedule ticks (runtime/schedules/)
 *   retention-timer.ts    this worker's periodic prune passes (`retention`; runtime/retention/)
 *   run-driver.ts         one flight: a run driven step by step under its lease
 *
 * What it offers a client of its own process (`createClient({ store, worker })`) is defined by the
 * client: start reservations (client/local-starts.ts) and in-process answers to the waits of that
 * process when a flight settles their run (client/local-waiters.ts).
 *
 * Long because `WorkerRuntime` is the one owner of the life cycle above: start, stop and drain
 * read and write the same state (`#state`, the flights, the parts), so they stay in one class;
 * each part it composes lives in its own module, and its options are the public `WorkerOptions`.
 */

import { PayloadLimitsCache } from '../limits/limits-cache.js';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { sql } from 'kysely';
import { z } from 'zod';
import { ALWAYS_CHECKED, checkOptions, integer, rule } from '../../dsl/option-checks.js';
import type { AnySchedule } from '../../dsl/schedule.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import { LeaseLostError } from '../errors.js';
import { assertSchedules, registerSchedules } from '../schedules/register-schedules.js';
import type { Store } from '../store/store.js';
import { NO_TELEMETRY, type Telemetry, type TelemetryOptions } from '../telemetry/telemetry.js';
import { loadWorkerTelemetry } from '../telemetry/otel-telemetry.js';
import type { LeasedRun } from '../store/leased-run.js';
import { millis } from '../store/millis.js';
import { DUE_RUN_STATUSES, sqlStatusList } from '../store/state-machines.js';
import { ClaimLoop } from './claim-loop.js';
import { CommitQueue } from './commit-queue.js';
import { FlightAbort, flightKey, type Flight } from './flight.js';
import { releaseLeases } from './lease.js';
import { LeaseKeeper } from './lease-keeper.js';
import { offerLocalStarts } from '../client/local-starts.js';
import { LocalWaiters } from '../client/local-waiters.js';
import { ReconcileTimer } from './reconcile-timer.js';
import { ScheduleTimer } from './schedule-timer.js';
import { RetentionTimer, retentionOptionsSchema, type RetentionOptions } from './retention-timer.js';
import { registerQueues } from './queue-slots.js';
import { registerFingerprints } from './register-fingerprints.js';
import { buildRegistry, ofServedVersion, verifyMigrated, verifyServed, type WorkflowRegistry } from './registry.js';
import { DEFAULT_CHILDREN_PER_COMMIT } from './executors/children-executor.js';
import { driveRun, type DriverContext } from './run-driver.js';
import { RunsSubscription } from './runs-subscription.js';
import { serializeError } from './step-errors.js';
import { isConnectionError, isSocketError } from '../store/connection-errors.js';
import { exponentialBackoffMs, sleep } from '../backoff.js';
import type { WorkerEvent } from './worker-events.js';

export interface WorkerOptions {
  readonly store: Store;
  /** Workflow versions with their handlers (the generated `<name>Handlers(...)` functions make these). */
  readonly workflows: readonly WorkflowRegistration[];
  /** Runs driven at once. Default 4. */
  readonly concurrency?: number;
  /** Written to `lease_owner` and `step_attempt.worker_id`. Default `host:pid:random`. */
  readonly workerId?: string;
  /**
   * Lease length; a run whose lease expires is claimed by another worker. Default 30 000.
   * An external intent stores its horizon when written (`intent_at + leaseMs + performTimeoutMs`
   * of the worker that wrote it), so workers with different settings still agree on it.
   */
  readonly leaseMs?: number;
  /** How often held leases are renewed. Default leaseMs / 3. */
  readonly heartbeatMs?: number;
  /** Claim poll when no NOTIFY arrives (retries and takeovers rely on it). Default 1 000. */
  readonly pollIntervalMs?: number;
  /** How often this worker runs a reconcile pass; 0 turns it off. Default 10 000. */
  readonly reconcileIntervalMs?: number;
  /**
   * Schedules (`schedule(...)` from ledgerflow/dsl) this worker registers when it starts and
   * ticks: each due tick starts one run, whichever of the workers that have it gets there first.
   * Their workflows must be migrated; this worker need not serve them.
   */
  readonly schedules?: readonly AnySchedule[];
  /** How often this worker looks for due schedule ticks; 0: it registers its schedules but never ticks them. Default 1 000. */
  readonly scheduleIntervalMs?: number;
  /**
   * Prune finished runs periodically (`ledgerflow prune` in the worker): every `intervalMs`
   * (default 10 minutes) runs finished at least `completedOlderThanMs` ago are deleted in batches
   * of `batchSize`, their identity and recorded effects kept in the archive (docs/operations/retention.md).
   * Default: no pruning.
   *
   * @example
   * createWorker({ store, workflows, retention: { completedOlderThanMs: 30 * 86_400_000 } });
   */
  readonly retention?: RetentionOptions;
  /** Everything the worker does and every error it survives. */
  readonly onEvent?: (event: WorkerEvent) => void;
  /**
   * How many children a `child`/`forEach` step starts per commit (each such commit also renews
   * the parent's lease). Default 500.
   */
  readonly childrenPerCommit?: number;
  /**
   * Start even though another version of a registered workflow has unfinished runs that this
   * worker has no handlers for (a rolling deploy in which another worker serves them): reported
   * as a `versions-unserved` event instead of refusing to start. Default false.
   */
  readonly allowMissingVersions?: boolean;
  /**
   * Where spans and metrics go when `@opentelemetry/api` is installed: default the globally
   * registered tracer and meter providers. Loaded at `start()`; without the package, nothing is
   * recorded and nothing costs anything. See docs/operations/observability.md.
   */
  readonly telemetry?: TelemetryOptions;
  /**
   * Group commit: while one step commit is in flight, the result commits other runs make
   * meanwhile wait for it and then go out together as ONE statement, each still fenced by its own
   * run's token (a lone commit goes out at once). More steps per second at concurrency > 1 for
   * no added latency; `false` sends every commit alone. Default true. See DESIGN.md "Group commit".
   */
  readonly groupCommit?: boolean;
}

export interface Worker {
  readonly id: string;
  /**
   * Verifies that every registration matches its migrated version, subscribes to
   * {@link RUNS_CHANNEL}, and starts claiming. Rejects (and starts nothing) on a mismatch.
   */
  start(): Promise<void>;
  /**
   * Stops claiming, lets in-flight steps finish (each commits and gives its run back) for up to
   * `timeoutMs` (default: one lease), then aborts the rest and releases their leases.
   */
  stop(options?: { readonly timeoutMs?: number }): Promise<void>;
  /**
   * Starts the worker if needed and resolves once nothing is left to do: no run of the
   * registered workflows is `pending` (due or delayed by a retry backoff) or `running`, none is
   * `waiting` for a time within `timeoutMs` (a sleep, a wait's timeout, a deadline) or woken,
   * and this worker drives none. Parked (`needs_reconciliation`) runs and runs waiting beyond
   * `timeoutMs` (for an event without a timeout, a far-off date) do not count. Rejects after
   * `timeoutMs` (default 60 000) naming what is left. For tests, benchmarks and one-shot jobs.
   *
   * @example
   * const worker = createWorker({ store, workflows: [registration], pollIntervalMs: 50 });
   * await client.start(orderPayment, input);
   * await worker.drain();
   * await worker.stop();
   */
  drain(options?: { readonly timeoutMs?: number }): Promise<void>;
  /** Runs driven right now. */
  readonly inFlight: number;
}

type WorkerState = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped';

/**
 * Creates a worker. Nothing happens until `start()` (or `drain()`).
 *
 * Worker life cycle: idle --start--> starting --verified--> running --stop--> stopping --> stopped.
 *
 * @example
 * const worker = createWorker({ store, workflows: [orderPaymentHandlers(handlers)], concurrency: 8 });
 * await worker.start();
 * process.once('SIGTERM', () => void worker.stop());
 */
export function createWorker(options: WorkerOptions): Worker {
  return new WorkerRuntime(options);
}

class WorkerRuntime implements Worker {
  readonly id: string;
  readonly #store: Store;
  readonly #registry: WorkflowRegistry;
  readonly #leaseMs: number;
  readonly #childrenPerCommit: number;
  readonly #limits: PayloadLimitsCache;
  readonly #commits: CommitQueue;
  readonly #pollIntervalMs: number;
  readonly #onEvent: (event: WorkerEvent) => void;
  readonly #allowMissingVersions: boolean;
  readonly #telemetryOptions: TelemetryOptions;
  #telemetry: Telemetry = NO_TELEMETRY;
  #unobserveDatabase: () => void = () => {};

  #state: WorkerState = 'idle';
  readonly #flights = new Map<string, Flight>();
  /** drain() calls waiting for a flight to end. */
  readonly #idleWaiters = new Set<() => void>();
  readonly #subscription: RunsSubscription;
  readonly #claims: ClaimLoop;
  readonly #leases: LeaseKeeper;
  readonly #reconciler: ReconcileTimer;
  readonly #schedules: readonly AnySchedule[];
  readonly #scheduler: ScheduleTimer;
  readonly #retention: RetentionTimer;
  readonly #waiters = new LocalWaiters((runId) => {
    for (const flight of this.#flights.values()) if (flight.runId === runId && !flight.abort.aborted) return true;
    return false;
  });
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: WorkerOptions) {
    this.#store = options.store;
    this.#registry = buildRegistry(options.workflows);
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    const concurrency = options.concurrency ?? 4;
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#childrenPerCommit = options.childrenPerCommit ?? DEFAULT_CHILDREN_PER_COMMIT;
    this.#limits = new PayloadLimitsCache(options.store.db);
    this.#commits = new CommitQueue(
      options.store.db,
      options.groupCommit === false
        ? { maxGroup: 1 }
        : {
            claims: {
              fusedClaim: (freeing) => this.#claims.fusedClaim(freeing),
              adopt: (runs) => this.#claims.adopt(undefined, runs),
            },
          },
    );
    const heartbeatMs = options.heartbeatMs ?? Math.floor(this.#leaseMs / 3);
    this.#pollIntervalMs = options.pollIntervalMs ?? 1_000;
    const reconcileIntervalMs = options.reconcileIntervalMs ?? 10_000;
    const scheduleIntervalMs = options.scheduleIntervalMs ?? 1_000;
    this.#schedules = options.schedules ?? [];
    this.#onEvent = options.onEvent ?? (() => {});
    this.#allowMissingVersions = options.allowMissingVersions === true;
    this.#telemetryOptions = options.telemetry ?? {};
    checkOptions(
      workerOptionsSchema,
      options,
      (problems) => new TypeError(`Invalid worker options: ${problems.join('; ')}.`),
    );
    assertSchedules(this.#schedules);

    const emit = (event: WorkerEvent): void => this.#emit(event);
    const db = this.#store.db;
    this.#subscription = new RunsSubscription({
      store: this.#store,
      isWanted: () => this.#state === 'starting' || this.#state === 'running',
      hint: () => this.#claims.hint(),
      emit,
    });
    this.#claims = new ClaimLoop({
      db,
      registry: this.#registry,
      workerId: this.id,
      leaseMs: this.#leaseMs,
      concurrency,
      pollIntervalMs: this.#pollIntervalMs,
      flights: this.#flights,
      subscription: this.#subscription,
      isRunning: () => this.#state === 'running',
      launch: (run) => this.#launch(run),
      emit,
    });
    this.#leases = new LeaseKeeper({ db, leaseMs: this.#leaseMs, heartbeatMs, flights: this.#flights, emit });
    this.#reconciler = new ReconcileTimer({
      store: this.#store,
      workflows: options.workflows,
      leaseMs: this.#leaseMs,
      intervalMs: reconcileIntervalMs,
      workerId: this.id,
      telemetry: () => this.#telemetry,
      emit,
    });
    this.#scheduler = new ScheduleTimer({ db, schedules: this.#schedules, intervalMs: scheduleIntervalMs, emit });
    this.#retention = new RetentionTimer({ db, retention: options.retention, emit });
    offerLocalStarts(this, {
      store: this.#store,
      reserve: (name, version) => this.#claims.reserveStart(name, version),
      waiters: this.#waiters,
    });
  }

  get inFlight(): number {
    return this.#flights.size;
  }

  start(): Promise<void> {
    if (this.#state === 'stopping' || this.#state === 'stopped') {
      return Promise.reject(new Error(`Worker ${this.id} was stopped; create a new worker to run again.`));
    }
    this.#starting ??= this.#start();
    return this.#starting;
  }

  async #start(): Promise<void> {
    this.#state = 'starting';
    let unserved: readonly string[];
    const began = performance.now();
    for (let tries = 1; ; tries++) {
      try {
        // Reads and idempotent registrations: all of them again after a lost session.
        await verifyMigrated(this.#store.db, this.#registry);
        await registerFingerprints(this.#store.db, this.#registry, this.id);
        await this.#limits.current();
        await registerQueues(this.#store.db, this.#registry);
        unserved = await verifyServed(this.#store.db, this.#registry, this.#allowMissingVersions);
        await registerSchedules(this.#store.db, this.#schedules);
        this.#telemetry = await loadWorkerTelemetry(this.#telemetryOptions);
        break;
      } catch (error) {
        if (startRetryable(error) && performance.now() - began < START_RETRY_MS) {
          this.#emit({ type: 'error', where: 'start', error: serializeError(error) });
          await sleep(exponentialBackoffMs(tries, { firstMs: 100, maxMs: 2_000 }));
          continue;
        }
        this.#state = 'idle';
        this.#starting = undefined;
        throw error;
      }
    }
    await this.#subscription.subscribe();
    this.#unobserveDatabase = this.#telemetry.observeDatabase(this.#store.db);
    this.#state = 'running';
    this.#leases.start();
    this.#reconciler.start();
    this.#scheduler.start();
    this.#retention.start();
    this.#claims.start();
    this.#emit({
      type: 'worker-started',
      workerId: this.id,
      workflows: this.#registry.all.map((w) => `${w.name}@${w.version}`),
    });
    if (unserved.length > 0) this.#emit({ type: 'versions-unserved', versions: unserved });
  }

  stop(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    this.#stopping ??= this.#stop(options);
    return this.#stopping;
  }

  async #stop(options: { readonly timeoutMs?: number }): Promise<void> {
    if (this.#state === 'starting') await this.#starting?.catch(() => {});
    if (this.#state !== 'running') {
      this.#state = 'stopped';
      return;
    }
    this.#state = 'stopping';
    const loopEnded = this.#claims.stop();
    this.#reconciler.stop();
    this.#scheduler.stop();
    this.#retention.stop();
    await loopEnded;
    await this.#subscription.close();

    const settled = (): Promise<unknown> => Promise.allSettled([...this.#flights.values()].map((f) => f.done));
    const timeoutMs = options.timeoutMs ?? this.#leaseMs;
    let released = 0;
    if (!(await settlesWithin(settled(), timeoutMs))) {
      const remaining = [...this.#flights.values()];
      for (const flight of remaining) flight.abort.abort(new LeaseLostError(`worker ${this.id} is stopping`));
      try {
        released = (
          await releaseLeases(this.#store.db, remaining, `worker ${this.id} stopped before the step finished`)
        ).length;
      } catch (error) {
        this.#emit({ type: 'error', where: 'stop', error: serializeError(error) });
      }
      // Handlers that ignore their AbortSignal cannot commit any more (the runs are released).
      await settlesWithin(settled(), 1_000);
    }
    await this.#claims.released();
    this.#leases.stop();
    await this.#reconciler.idle();
    await this.#scheduler.idle();
    await this.#retention.idle();
    this.#unobserveDatabase();
    this.#state = 'stopped';
    this.#emit({ type: 'worker-stopped', workerId: this.id, released });
  }

  async drain(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    await this.start();
    const timeoutMs = options.timeoutMs ?? 60_000;
    const started = performance.now();
    let remaining = -1;
    for (;;) {
      if (this.#flights.size === 0) {
        try {
          remaining = await this.#countUnfinished(Math.max(0, timeoutMs - (performance.now() - started)));
          if (remaining === 0 && this.#flights.size === 0) return;
        } catch (error) {
          this.#emit({ type: 'error', where: 'drain', error: serializeError(error) });
        }
      }
      if (this.#state !== 'running') throw new Error(`Worker ${this.id} stopped while draining.`);
      if (performance.now() - started > timeoutMs) {
        throw new Error(
          `drain() timed out after ${timeoutMs} ms: ${this.#flights.size} run(s) in flight here, ` +
            `${remaining < 0 ? 'unknown' : remaining} pending, running or waiting for less than the timeout in the database.`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(this.#pollIntervalMs, 100));
        const waiters = this.#idleWaiters;
        waiters.add(done);
        function done(): void {
          clearTimeout(timer);
          waiters.delete(done);
          resolve();
        }
      });
    }
  }

  /**
   * Runs left to do: pending, running, or waiting for a time within `horizonMs` (or woken). Three
   * index-friendly counts rather than one OR, so that runs waiting far ahead — there may be
   * millions — are not read at every poll.
   */
  async #countUnfinished(horizonMs: number): Promise<number> {
    const registered = ofServedVersion(this.#registry);
    const { rows } = await sql<{ n: number }>`
      SELECT (SELECT count(*) FROM ledgerflow.workflow_run r WHERE r.status = 'pending' AND ${registered})
           + (SELECT count(*) FROM ledgerflow.workflow_run r WHERE r.status = 'running' AND ${registered})
           + (SELECT count(*) FROM ledgerflow.workflow_run r
               -- the IN repeats the due index's predicate, so the planner may range-scan it
               WHERE r.status IN (${sqlStatusList(DUE_RUN_STATUSES)}) AND r.run_after <= statement_timestamp() + ${millis(horizonMs)}
                 AND r.status = 'waiting' AND ${registered}) AS n`.execute(this.#store.db);
    return Number(rows[0]?.n ?? 0);
  }

  /** Drives a run this worker holds (claimed, taken by a fused claim, or adopted) as a new flight. */
  #launch(run: LeasedRun): void {
    const workflow = this.#registry.get(run.workflowName, run.workflowVersion);
    const step = workflow?.steps[run.currentStep];
    this.#emit({
      type: 'run-claimed',
      runId: run.id,
      workflow: `${run.workflowName}@${run.workflowVersion}`,
      fencingToken: run.fencingToken,
      step: step?.name ?? null,
      attempt: run.attempt,
      tookOver: run.tookOver,
    });
    const flight: Flight = {
      runId: run.id,
      fencingToken: run.fencingToken,
      abort: new FlightAbort(),
      renewedAt: performance.now(),
      done: Promise.resolve(),
      refilled: false,
      ...(run.pendingStart !== undefined ? { pendingStart: run.pendingStart } : {}),
    };
    const key = flightKey(run.id, run.fencingToken);
    this.#flights.set(key, flight);
    flight.abort.addEventListener('abort', () => this.#waiters.flightOver(run.id), { once: true });
    const driver: DriverContext = {
      db: this.#store.db,
      terminateBackend: this.#store.terminateBackend,
      pipelines: this.#store.pipelines === true,
      registry: this.#registry,
      workerId: this.id,
      leaseMs: this.#leaseMs,
      childrenPerCommit: this.#childrenPerCommit,
      commits: this.#commits,
      isStopping: () => this.#state !== 'running',
      emit: (event) => this.#emit(event),
      claimNext: () => this.#claims.fusedClaim([flight]),
      adopt: (runs) => this.#claims.adopt(flight, runs),
      telemetry: this.#telemetry,
      limits: this.#limits,
      waiters: this.#waiters,
    };
    flight.done = driveRun(driver, run, flight.abort)
      .catch((error: unknown) =>
        this.#emit({ type: 'error', where: 'run', runId: run.id, error: serializeError(error) }),
      )
      .finally(() => {
        this.#flights.delete(key);
        // Before the waits look again: a start's run not inserted by now is its start's to insert.
        run.pendingStart?.flightEnded();
        this.#waiters.flightOver(run.id);
        this.#claims.flightEnded(flight);
        for (const waiter of this.#idleWaiters) waiter();
        this.#idleWaiters.clear();
      });
  }

  #emit(event: WorkerEvent): void {
    try {
      this.#onEvent(event);
    } catch {
      // A throwing listener must not take the worker down.
    }
  }
}

function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * What the worker's options allow; `heartbeatMs` is checked as the worker will use it, its
 * default (a third of the lease) included.
 */
const workerOptionsSchema = z
  .object({
    concurrency: rule(integer().min(1), 'must be an integer >= 1').optional(),
    leaseMs: rule(z.number().gt(0), 'must be > 0').optional(),
    heartbeatMs: rule(z.number(), 'must be > 0 and < leaseMs').optional(),
    pollIntervalMs: rule(z.number().gt(0), 'must be > 0').optional(),
    reconcileIntervalMs: rule(z.number().min(0), 'must be >= 0').optional(),
    scheduleIntervalMs: rule(z.number().min(0), 'must be >= 0').optional(),
    childrenPerCommit: rule(integer().min(1), 'must be an integer >= 1').optional(),
    workflows: z
      .array(z.unknown())
      .refine((workflows) => workflows.length > 0, 'is empty; register at least one workflow'),
    retention: retentionOptionsSchema.optional(),
  })
  .superRefine(({ leaseMs = 30_000, heartbeatMs = Math.floor(leaseMs / 3) }, ctx) => {
    if (typeof leaseMs !== 'number' || typeof heartbeatMs !== 'number' || (heartbeatMs > 0 && heartbeatMs < leaseMs))
      return;
    ctx.addIssue({
      code: 'custom',
      path: ['heartbeatMs'],
      message: `must be > 0 and < leaseMs (got ${heartbeatMs} with leaseMs ${leaseMs})`,
    });
  }, ALWAYS_CHECKED);

/** How long `start()` goes on through sessions the database ends under it. */
const START_RETRY_MS = 10_000;

/**
 * A session the database ended or refused for now (terminated, shutting down, too many
 * connections, a host that turned read-only) while the worker starts: tried again, the start being reads and
 * idempotent registrations. A database that cannot be reached at all (ECONNREFUSED, ENOTFOUND …)
 * fails the start at once: a wrong URL is said at once, not after a wait.
 */
function startRetryable(error: unknown): boolean {
  return isConnectionError(error) && !isSocketError(error);
}
