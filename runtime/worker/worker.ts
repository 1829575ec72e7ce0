import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { sql } from 'kysely';
import type { WorkflowRegistration } from '../contracts/registration.js';
import { LeaseLostError } from '../errors.js';
import { faultPoint } from '../faults/fault-points.js';
import { runReconcilePass } from '../reconciler/reconciler.js';
import type { Store } from '../store/store.js';
import { claimRuns, loadLeasedRun, type LeasedRun } from './claim.js';
import { releaseLeases, renewLeases } from './lease.js';
import { buildRegistry, verifyMigrated, type WorkflowRegistry } from './registry.js';
import { driveRun, type DriverContext } from './run-driver.js';
import type { FusedClaim } from './step-commits.js';
import { serializeError } from './step-errors.js';
import type { WorkerEvent } from './worker-events.js';

/** The channel `start()` NOTIFYs on (once per new run, never per step) to wake idle workers. */
export const RUNS_CHANNEL = 'ledgerflow_runs';

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
   * Use one value for every worker and reconciler of a deployment: an external intent is
   * reconciled only after `intent_at + leaseMs + performTimeoutMs` (database time).
   */
  readonly leaseMs?: number;
  /** How often held leases are renewed. Default leaseMs / 3. */
  readonly heartbeatMs?: number;
  /** Claim poll when no NOTIFY arrives (retries and takeovers rely on it). Default 1 000. */
  readonly pollIntervalMs?: number;
  /** How often this worker runs a reconcile pass; 0 turns it off. Default 10 000. */
  readonly reconcileIntervalMs?: number;
  /** Everything the worker does and every error it survives. */
  readonly onEvent?: (event: WorkerEvent) => void;
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
   * registered workflows is `pending` (due or delayed by a retry backoff) or `running`, and
   * this worker drives none. Parked (`needs_reconciliation`) runs do not count. Rejects after
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

interface InFlight {
  readonly runId: string;
  readonly fencingToken: number;
  readonly controller: AbortController;
  /** Local monotonic time of the last confirmed renewal: a duration, never compared to the database. */
  renewedAt: number;
  done: Promise<void>;
  /** Its completion commit claimed for the slot it frees (fused), so the claim loop need not. */
  refilled: boolean;
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
  readonly #registrations: readonly WorkflowRegistration[];
  readonly #concurrency: number;
  readonly #leaseMs: number;
  readonly #heartbeatMs: number;
  readonly #pollIntervalMs: number;
  readonly #reconcileIntervalMs: number;
  readonly #onEvent: (event: WorkerEvent) => void;

  #state: WorkerState = 'idle';
  readonly #inFlight = new Map<string, InFlight>();
  /**
   * The last claim took all it asked for, so more runs are probably due: completion commits
   * then claim the next run themselves (fused). Cleared by a claim that comes back short.
   */
  #backlog = false;
  /**
   * A claim is in flight — the loop's, or one fused into a completion commit. One at a time:
   * claimers racing over the head of the pending index only skip each other's locked rows.
   */
  #claiming = false;
  /** The limit of the fused claim in flight. */
  #fusedLimit = 0;
  /** Releases of runs a fused claim took while this worker was already stopping. */
  readonly #releasing = new Set<Promise<void>>();
  #loop: Promise<void> | undefined;
  #wakeUp: (() => void) | undefined;
  #wakePending = false;
  #idleWaiters = new Set<() => void>();
  #unlisten: (() => Promise<void>) | undefined;
  /** A claim failed: the subscription may be dead without having said so (half-open connection). */
  #listenStale = false;
  #listening: Promise<void> | undefined;
  /** Identifies the current subscription, so that a late loss report of an old one is ignored. */
  #listenGeneration = 0;
  /** The generation whose loss was reported (possibly before its subscribe call returned). */
  #lostGeneration = 0;
  /** The subscription was lost or could not be made; the next success emits `listener-restored`. */
  #listenDown = false;
  #listenFailures = 0;
  #relistenTimer: NodeJS.Timeout | undefined;
  #heartbeatTimer: NodeJS.Timeout | undefined;
  #heartbeatBusy = false;
  #reconcileTimer: NodeJS.Timeout | undefined;
  #reconcilePass: Promise<void> | undefined;
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: WorkerOptions) {
    this.#store = options.store;
    this.#registrations = options.workflows;
    this.#registry = buildRegistry(options.workflows);
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.#concurrency = options.concurrency ?? 4;
    this.#leaseMs = options.leaseMs ?? 30_000;
    this.#heartbeatMs = options.heartbeatMs ?? Math.floor(this.#leaseMs / 3);
    this.#pollIntervalMs = options.pollIntervalMs ?? 1_000;
    this.#reconcileIntervalMs = options.reconcileIntervalMs ?? 10_000;
    this.#onEvent = options.onEvent ?? (() => {});
    const problems: string[] = [];
    if (!Number.isInteger(this.#concurrency) || this.#concurrency < 1) problems.push(`concurrency must be an integer >= 1 (got ${this.#concurrency})`);
    if (!(this.#leaseMs > 0)) problems.push(`leaseMs must be > 0 (got ${this.#leaseMs})`);
    if (!(this.#heartbeatMs > 0 && this.#heartbeatMs < this.#leaseMs)) {
      problems.push(`heartbeatMs must be > 0 and < leaseMs (got ${this.#heartbeatMs} with leaseMs ${this.#leaseMs})`);
    }
    if (!(this.#pollIntervalMs > 0)) problems.push(`pollIntervalMs must be > 0 (got ${this.#pollIntervalMs})`);
    if (!(this.#reconcileIntervalMs >= 0)) problems.push(`reconcileIntervalMs must be >= 0 (got ${this.#reconcileIntervalMs})`);
    if (this.#registry.all.length === 0) problems.push('workflows is empty; register at least one workflow');
    if (problems.length > 0) throw new TypeError(`Invalid worker options: ${problems.join('; ')}.`);
  }

  get inFlight(): number {
    return this.#inFlight.size;
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
    try {
      await verifyMigrated(this.#store.db, this.#registry);
    } catch (error) {
      this.#state = 'idle';
      this.#starting = undefined;
      throw error;
    }
    await this.#listen();
    this.#state = 'running';
    this.#heartbeatTimer = setInterval(() => void this.#heartbeat(), this.#heartbeatMs);
    if (this.#reconcileIntervalMs > 0) {
      this.#reconcileTimer = setInterval(() => this.#startReconcilePass(), this.#reconcileIntervalMs);
    }
    this.#loop = this.#claimLoop();
    this.#emit({ type: 'worker-started', workerId: this.id, workflows: this.#registry.all.map((w) => `${w.name}@${w.version}`) });
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
    this.#wake();
    clearInterval(this.#reconcileTimer);
    await this.#loop;
    clearTimeout(this.#relistenTimer);
    await this.#listening;
    await this.#unlisten?.().catch(() => {});
    this.#unlisten = undefined;

    const settled = (): Promise<unknown> => Promise.allSettled([...this.#inFlight.values()].map((f) => f.done));
    const timeoutMs = options.timeoutMs ?? this.#leaseMs;
    let released = 0;
    if (!(await settlesWithin(settled(), timeoutMs))) {
      const remaining = [...this.#inFlight.values()];
      for (const flight of remaining) flight.controller.abort(new LeaseLostError(`worker ${this.id} is stopping`));
      try {
        released = (await releaseLeases(this.#store.db, remaining, `worker ${this.id} stopped before the step finished`)).length;
      } catch (error) {
        this.#emit({ type: 'error', where: 'stop', error: serializeError(error) });
      }
      // Handlers that ignore their AbortSignal cannot commit any more (the runs are released).
      await settlesWithin(settled(), 1_000);
    }
    await Promise.all(this.#releasing);
    clearInterval(this.#heartbeatTimer);
    await this.#reconcilePass;
    this.#state = 'stopped';
    this.#emit({ type: 'worker-stopped', workerId: this.id, released });
  }

  async drain(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    await this.start();
    const timeoutMs = options.timeoutMs ?? 60_000;
    const started = performance.now();
    let remaining = -1;
    for (;;) {
      if (this.#inFlight.size === 0) {
        try {
          remaining = await this.#countUnfinished();
          if (remaining === 0 && this.#inFlight.size === 0) return;
        } catch (error) {
          this.#emit({ type: 'error', where: 'drain', error: serializeError(error) });
        }
      }
      if (this.#state !== 'running') throw new Error(`Worker ${this.id} stopped while draining.`);
      if (performance.now() - started > timeoutMs) {
        throw new Error(
          `drain() timed out after ${timeoutMs} ms: ${this.#inFlight.size} run(s) in flight here, ` +
            `${remaining < 0 ? 'unknown' : remaining} pending or running in the database.`,
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

  async #countUnfinished(): Promise<number> {
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n
        FROM ledgerflow.workflow_run r
        JOIN unnest(${this.#registry.names}::text[], ${this.#registry.versions}::int[]) AS w(name, version)
          ON r.workflow_name = w.name AND r.workflow_version = w.version
       WHERE r.status IN ('pending', 'running')`.execute(this.#store.db);
    return rows[0]?.n ?? 0;
  }

  async #claimLoop(): Promise<void> {
    let failures = 0;
    while (this.#state === 'running') {
      const free = this.#concurrency - this.#inFlight.size;
      if (free > 0 && !this.#claiming) {
        this.#claiming = true;
        try {
          const claimed = await claimRuns(this.#store.db, this.#registry, { workerId: this.id, leaseMs: this.#leaseMs, limit: free }).finally(
            () => (this.#claiming = false),
          );
          failures = 0;
          this.#backlog = claimed.length === free;
          if (this.#listenStale) await this.#listen();
          for (const run of claimed) this.#launch(run);
          if (claimed.length === free) continue;
        } catch (error) {
          failures += 1;
          this.#listenStale = true;
          this.#emit({ type: 'error', where: 'claim', error: serializeError(error) });
          await this.#sleep(Math.min(5_000, 50 * 2 ** failures));
          continue;
        }
      }
      await this.#sleep(this.#pollIntervalMs);
    }
  }

  /**
   * While a backlog lasts, a completing run's commit claims for the slot it frees and every
   * other free one (the limit counts the completing run, still in flight until it returns) —
   * once at least a quarter of the slots are free: a claim costs its planning, so at high
   * concurrency slots are gathered into batches (mostly by later completions) rather than
   * refilled one claim per run.
   */
  #fusedClaim(): FusedClaim | undefined {
    if (this.#state !== 'running' || !this.#backlog || this.#claiming) return undefined;
    const limit = this.#concurrency - this.#inFlight.size + 1;
    if (limit < Math.ceil(this.#concurrency / 4)) return undefined;
    this.#claiming = true;
    this.#fusedLimit = limit;
    return { registry: this.#registry, options: { workerId: this.id, leaseMs: this.#leaseMs, limit: this.#fusedLimit } };
  }

  /** The answer to a {@link WorkerRuntime.#fusedClaim}: the runs it took; `undefined` if its commit failed. */
  #adopt(flight: InFlight, runs: readonly LeasedRun[] | undefined): void {
    this.#claiming = false;
    if (runs === undefined) {
      // The commit failed — or its outcome is unknown (the connection broke after it committed),
      // and then its claim took runs nobody here drives: ask the database which runs are ours.
      void this.#adoptOrphans();
      this.#wake();
      return;
    }
    flight.refilled = true;
    this.#backlog = runs.length === this.#fusedLimit;
    if (runs.length === 0) return;
    if (this.#state === 'running') {
      for (const run of runs) this.#launch(run);
      return;
    }
    // stop() began while the commit was in flight: give them back untouched.
    const leases = runs.map((run) => ({ runId: run.id, fencingToken: run.fencingToken }));
    const releasing = releaseLeases(this.#store.db, leases, `worker ${this.id} was stopping when it claimed the run`)
      .then(() => {})
      .catch((error: unknown) => this.#emit({ type: 'error', where: 'stop', error: serializeError(error) }))
      .finally(() => this.#releasing.delete(releasing));
    this.#releasing.add(releasing);
  }

  /**
   * Launches every run the database says this worker holds and no flight drives: what a claim
   * whose commit outcome was unknown took. Otherwise they would wait out their lease and count
   * as a crash.
   */
  async #adoptOrphans(): Promise<void> {
    try {
      const { rows } = await sql<{ id: string; fencing_token: number }>`
        SELECT id, fencing_token FROM ledgerflow.workflow_run WHERE status = 'running' AND lease_owner = ${this.id}`.execute(this.#store.db);
      for (const row of rows) {
        if (this.#inFlight.has(flightKey(row.id, row.fencing_token))) continue;
        const run = await loadLeasedRun(this.#store.db, row.id, row.fencing_token);
        if (run === undefined || this.#inFlight.has(flightKey(run.id, run.fencingToken))) continue;
        if (this.#state === 'running') {
          this.#emit({ type: 'run-adopted', runId: run.id, fencingToken: run.fencingToken });
          this.#launch(run);
        } else {
          await releaseLeases(this.#store.db, [{ runId: run.id, fencingToken: run.fencingToken }], `worker ${this.id} was stopping when it found the run`);
        }
      }
    } catch (error) {
      this.#emit({ type: 'error', where: 'claim', error: serializeError(error) });
    }
  }

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
    });
    const flight: InFlight = {
      runId: run.id,
      fencingToken: run.fencingToken,
      controller: new AbortController(),
      renewedAt: performance.now(),
      done: Promise.resolve(),
      refilled: false,
    };
    const key = flightKey(run.id, run.fencingToken);
    this.#inFlight.set(key, flight);
    const driver: DriverContext = {
      db: this.#store.db,
      terminateBackend: this.#store.terminateBackend,
      registry: this.#registry,
      workerId: this.id,
      leaseMs: this.#leaseMs,
      isStopping: () => this.#state !== 'running',
      emit: (event) => this.#emit(event),
      claimNext: () => this.#fusedClaim(),
      adopt: (runs) => this.#adopt(flight, runs),
    };
    flight.done = driveRun(driver, run, flight.controller.signal)
      .catch((error: unknown) => this.#emit({ type: 'error', where: 'run', runId: run.id, error: serializeError(error) }))
      .finally(() => {
        this.#inFlight.delete(key);
        // While a backlog lasts and other runs are in flight, the next completion's fused claim
        // refills this slot together with its own (a batch, one commit fewer); the loop's poll
        // bounds how long the slot can wait for one.
        if (!flight.refilled && !(this.#backlog && this.#inFlight.size > 0)) this.#wake();
        for (const waiter of this.#idleWaiters) waiter();
        this.#idleWaiters.clear();
      });
  }

  /**
   * Renews every held lease in one statement. A lease that was not confirmed for a whole lease
   * period (database unreachable, or this timer stalled) is treated as lost locally: its
   * handler is aborted, so that nothing — in particular no `perform` — starts under it.
   */
  async #heartbeat(): Promise<void> {
    const now = performance.now();
    for (const flight of this.#inFlight.values()) {
      if (now - flight.renewedAt > this.#leaseMs && !flight.controller.signal.aborted) {
        flight.controller.abort(new LeaseLostError(`lease on run ${flight.runId} not renewed within ${this.#leaseMs} ms`));
      }
    }
    if (this.#heartbeatBusy || this.#inFlight.size === 0) return;
    this.#heartbeatBusy = true;
    try {
      await faultPoint('before-lease-renewal');
      const flights = [...this.#inFlight.values()].filter((f) => !f.controller.signal.aborted);
      const sentAt = performance.now();
      const { lost } = await renewLeases(this.#store.db, flights, this.#leaseMs);
      const lostFlights = new Set(lost.map((l) => flightKey(l.runId, l.fencingToken)));
      for (const flight of flights) {
        if (lostFlights.has(flightKey(flight.runId, flight.fencingToken))) {
          flight.controller.abort(new LeaseLostError(`lease on run ${flight.runId} (token ${flight.fencingToken}) was taken over`));
          this.#emit({ type: 'lease-lost', runId: flight.runId, fencingToken: flight.fencingToken, step: null });
        } else {
          flight.renewedAt = sentAt;
        }
      }
    } catch (error) {
      this.#emit({ type: 'error', where: 'heartbeat', error: serializeError(error) });
    } finally {
      this.#heartbeatBusy = false;
    }
  }

  #startReconcilePass(): void {
    if (this.#reconcilePass !== undefined || this.#state !== 'running') return;
    this.#reconcilePass = runReconcilePass({
      store: this.#store,
      workflows: this.#registrations,
      leaseMs: this.#leaseMs,
      reconcilerId: `${this.id}:reconciler`,
    })
      .then((report) => {
        if (report.recorded + report.released + report.parked > 0) this.#emit({ type: 'reconcile-pass', report });
      })
      .catch((error: unknown) => this.#emit({ type: 'error', where: 'reconcile', error: serializeError(error) }))
      .finally(() => {
        this.#reconcilePass = undefined;
      });
  }

  /**
   * Subscribes to {@link RUNS_CHANNEL}, replacing any earlier subscription. A subscription that
   * breaks (its backend terminated, the server restarted) reports itself: the worker emits
   * `listener-lost` and subscribes again with backoff (100 ms, doubling up to 5 s); once it is
   * back it emits `listener-restored` and claims at once, for the runs started while nobody
   * listened. In between, only the poll finds new runs.
   */
  #listen(): Promise<void> {
    this.#listening ??= this.#subscribe().finally(() => (this.#listening = undefined));
    return this.#listening;
  }

  async #subscribe(): Promise<void> {
    clearTimeout(this.#relistenTimer);
    this.#relistenTimer = undefined;
    this.#listenStale = false;
    const generation = ++this.#listenGeneration;
    const previous = this.#unlisten;
    this.#unlisten = undefined;
    await previous?.().catch(() => {});
    let unlisten: () => Promise<void>;
    try {
      unlisten = await this.#store.listen(RUNS_CHANNEL, () => this.#wake(), (error) => this.#listenerLost(generation, error));
    } catch (error) {
      this.#listenDown = true;
      this.#listenFailures += 1;
      this.#emit({ type: 'error', where: 'listen', error: serializeError(error) });
      this.#scheduleListen();
      return;
    }
    if (!this.#wantsListener() || this.#lostGeneration === generation) {
      await unlisten().catch(() => {});
      return;
    }
    this.#unlisten = unlisten;
    if (this.#listenDown) {
      this.#emit({ type: 'listener-restored', failedAttempts: this.#listenFailures });
      this.#wake();
    }
    this.#listenDown = false;
    this.#listenFailures = 0;
  }

  #listenerLost(generation: number, error: Error): void {
    if (generation !== this.#listenGeneration || !this.#wantsListener()) return;
    this.#lostGeneration = generation;
    this.#unlisten = undefined;
    this.#listenDown = true;
    this.#emit({ type: 'listener-lost', error: serializeError(error) });
    this.#scheduleListen();
  }

  #scheduleListen(): void {
    if (this.#relistenTimer !== undefined || !this.#wantsListener()) return;
    const delayMs = Math.min(5_000, 100 * 2 ** this.#listenFailures);
    this.#relistenTimer = setTimeout(() => {
      this.#relistenTimer = undefined;
      void this.#listen();
    }, delayMs);
  }

  #wantsListener(): boolean {
    return this.#state === 'starting' || this.#state === 'running';
  }

  #wake(): void {
    const wakeUp = this.#wakeUp;
    if (wakeUp === undefined) {
      this.#wakePending = true;
      return;
    }
    this.#wakeUp = undefined;
    wakeUp();
  }

  /** Sleeps up to `ms`; a NOTIFY, a finished run or stop() wakes it early. */
  #sleep(ms: number): Promise<void> {
    if (this.#wakePending) {
      this.#wakePending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#wakeUp = undefined;
        resolve();
      }, ms);
      this.#wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
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

/** A flight is one lease: a run id AND its fencing token (a stale flight of the run may still be around). */
function flightKey(runId: string, fencingToken: number): string {
  return `${runId}:${fencingToken}`;
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
