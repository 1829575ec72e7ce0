/**
 * ledgerflow's telemetry: OpenTelemetry spans and metrics for runs, step attempts, performs and
 * reconcile lookups, behind one small interface with two implementations.
 *
 *   NO_TELEMETRY      `@opentelemetry/api` is not installed: every method is a no-op that
 *                     returns a shared object — nothing is allocated per run or per step.
 *   OtelTelemetry     the API is loaded (`loadTelemetry`, otel-telemetry.ts); spans go to the
 *                     given or the global tracer provider, metrics to the given or the global
 *                     meter provider. With no SDK registered the API is a no-op itself.
 *
 * Spans (names and attributes in `attributes.ts`):
 *
 *   ledgerflow.run <workflow>          one per claim (flight), parent = the context stored when the
 *   └─ ledgerflow.step <step>          run was started; one per step attempt the flight drives
 *      ├─ ledgerflow.perform <step>    an external step's provider call
 *      └─ ledgerflow.reconcile <step>  a lookup by the next attempt (a reconcile pass's lookup is
 *                                      a child of the stored context instead)
 *
 * A run trace ends its spans from the worker events of its own flight (`observe`): the driver
 * only starts them. A step span ends at the event that ends its attempt (succeeded, skipped,
 * failed, parked, waiting, rescheduled, lease lost, deadline); a span still open when the next
 * attempt starts or the flight ends is closed as `resync`/`abandoned`. Handlers run inside their
 * step's (or perform's) span context, so their own instrumented calls are its children.
 */

import type { Kysely } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import type { LeasedRun } from '../store/leased-run.js';
import type { WorkerEvent } from '../worker/worker-events.js';
import type { MeterProviderLike, TracerProviderLike } from './otel-api.js';

/**
 * Where ledgerflow's spans and metrics go (`WorkerOptions.telemetry`, `ClientOptions.telemetry`,
 * `ReconcilePassOptions.telemetry`). Both default to the globally registered providers of
 * `@opentelemetry/api`; without that package installed, ledgerflow records nothing.
 *
 * @example
 * const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
 * const worker = createWorker({ store, workflows, telemetry: { tracerProvider: provider } });
 */
export interface TelemetryOptions {
  readonly tracerProvider?: TracerProviderLike;
  readonly meterProvider?: MeterProviderLike;
  /** `false`: record nothing even where the API is installed (the path taken without it). Default true. */
  readonly enabled?: boolean;
}

/** Who looked an intent up, and about what (the attributes of a reconcile span). */
export interface ReconcileSubject {
  readonly runId: string;
  readonly workflow: string;
  readonly workflowVersion: number;
  readonly step: string;
  readonly key: string;
  readonly intentAttempt: number;
  /** `attempt`: the step's next attempt (a child of its step span); `pass`: a reconcile pass. */
  readonly by: 'attempt' | 'pass';
  /** `pass` only: the run's stored trace context, which the lookup's span continues. */
  readonly traceContext?: Json | null;
}

export interface Telemetry {
  /** False when `@opentelemetry/api` is not available: every method is then a no-op. */
  readonly enabled: boolean;
  /** Starts the span of one claim of a run (one flight). */
  runStarted(run: LeasedRun, workerId: string): RunTrace;
  /** The active trace context as a carrier to store with a new run; `null` when nothing is traced. */
  captureContext(): Json | null;
  /** A reconcile lookup as a span, counted by its outcome (`status` of what it returns, or `error`). */
  reconcile<T extends { readonly status: string } | undefined>(
    subject: ReconcileSubject,
    lookup: () => Promise<T>,
  ): Promise<T>;
  /** Registers the database gauges (queue depth, open intents, oldest intent); returns their removal. */
  observeDatabase(db: Kysely<LedgerflowDatabase>): () => void;
}

/** The spans of one flight. */
export interface RunTrace {
  /** Runs `fn` with the run span as the active context. */
  within<R>(fn: () => R): R;
  /** Starts the span of a step attempt (ending one still open). */
  stepStarted(step: StepDefinition, attempt: number): StepTrace;
  /**
   * The open step's handler finished and its result is carried to the run's next commit, not
   * durable yet: its span stays open until that commit's `step-succeeded` (or `step-skipped`)
   * for it, which ends it dated when the handler finished — or until the flight ends without it
   * (`abandoned`, `lease-lost`, `error`).
   */
  stepCarried(): void;
  /** A worker event of this flight: ends spans, sets outcomes, counts. */
  observe(event: WorkerEvent): void;
  /** The drive threw (a bug or a database failure the driver did not handle). */
  failed(error: unknown): void;
  /** The flight is over: ends what is still open. */
  end(): void;
}

/** The span of one step attempt, as the executors see it (`StepExecution.trace`). */
export interface StepTrace {
  /** Runs `fn(arg)` with the step span as the active context (no closure needed on the hot path). */
  within<A, R>(fn: (arg: A) => R, arg: A): R;
  /** The step's idempotency key is known. */
  keyed(key: string): void;
  /** An external step's provider call, as a child span. */
  perform<R>(key: string, call: () => Promise<R>): Promise<R>;
  /** A lookup of an earlier attempt's intent, as a child span. */
  reconcile<T extends { readonly status: string } | undefined>(
    key: string,
    intentAttempt: number,
    lookup: () => Promise<T>,
  ): Promise<T>;
  /** The step span as a stored carrier (the children a `child`/`forEach` step starts continue it); null untraced. */
  carrier(): Json | null;
}

const NOOP_STEP: StepTrace = {
  within: (fn, arg) => fn(arg),
  keyed: () => {},
  perform: (_key, call) => call(),
  reconcile: (_key, _attempt, lookup) => lookup(),
  carrier: () => null,
};

const NOOP_RUN: RunTrace = {
  within: (fn) => fn(),
  stepStarted: () => NOOP_STEP,
  stepCarried: () => {},
  observe: () => {},
  failed: () => {},
  end: () => {},
};

/** Telemetry off: what the runtime uses until (and unless) the API is loaded. */
export const NO_TELEMETRY: Telemetry = {
  enabled: false,
  runStarted: () => NOOP_RUN,
  captureContext: () => null,
  reconcile: (_subject, lookup) => lookup(),
  observeDatabase: () => () => {},
};

/** The trace of a flight when telemetry is off (shared: nothing is allocated per run or step). */
export const NO_RUN_TRACE: RunTrace = NOOP_RUN;
