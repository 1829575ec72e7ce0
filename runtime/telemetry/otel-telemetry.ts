import type { Kysely } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import type { LeasedRun } from '../store/leased-run.js';
import { StepFailure, type FailurePhase, type SerializedError } from '../worker/step-errors.js';
import type { WorkerEvent } from '../worker/worker-events.js';
import { ATTR, INSTRUMENTATION_SCOPE, METRIC, runAttributes, SPAN } from './attributes.js';
import { observeDatabaseGauges } from './database-gauges.js';
import {
  loadOtelApi,
  type OtelApi,
  type OtelAttributes,
  type OtelContext,
  type OtelCounter,
  type OtelHistogram,
  type OtelImporter,
  type OtelMeter,
  type OtelSpan,
  type OtelTracer,
  type TracerProviderLike,
} from './otel-api.js';
import { captureTraceContext, restoreTraceContext } from './trace-context.js';
import {
  NO_TELEMETRY,
  type ReconcileSubject,
  type RunTrace,
  type StepTrace,
  type Telemetry,
  type TelemetryOptions,
} from './telemetry.js';

/*
 * The telemetry of telemetry.ts over `@opentelemetry/api`, loaded once per process
 * (`loadTelemetry`, `loadWorkerTelemetry`): a run's span and its steps' spans, ended from the
 * worker events of their flight, and the metrics. The span tree and why it ends where it does:
 * telemetry.ts.
 * Long because the spans and the metrics are kept by one object over the worker's events (each
 * event may end a span and count a metric); the names, the attributes and the gauges are apart.
 */

/**
 * Loads `@opentelemetry/api` (once per process) and returns telemetry over the given or global
 * providers — or {@link NO_TELEMETRY} when the API cannot be imported. `importer` replaces the
 * import (tests).
 */
export async function loadTelemetry(options: TelemetryOptions = {}, importer?: OtelImporter): Promise<Telemetry> {
  if (options.enabled === false) return NO_TELEMETRY;
  const api = await loadOtelApi(importer);
  return api === undefined ? NO_TELEMETRY : new OtelTelemetry(api, options);
}

/**
 * A worker's (and a reconcile pass's) telemetry: as {@link loadTelemetry}, but {@link NO_TELEMETRY}
 * also when the API is there and nothing is registered behind it — no provider passed, the global
 * tracer provider the API's no-op and the global meter provider too. Spans and metrics would then go
 * nowhere, and the API's no-op objects still cost CPU per step (measured: `npm run bench`,
 * "telemetry"). Register the SDK before starting workers, as OpenTelemetry's own guides say.
 * (The client always loads the API: capturing the active context at `start` needs no SDK.)
 */
export async function loadWorkerTelemetry(options: TelemetryOptions = {}, importer?: OtelImporter): Promise<Telemetry> {
  const telemetry = await loadTelemetry(options, importer);
  if (
    !(telemetry instanceof OtelTelemetry) ||
    options.tracerProvider !== undefined ||
    options.meterProvider !== undefined
  )
    return telemetry;
  return sdkRegistered(telemetry.api) ? telemetry : NO_TELEMETRY;
}

/** Is a tracer or meter provider registered with the API (anything but its built-in no-ops)? */
export function sdkRegistered(api: OtelApi): boolean {
  const provider = api.trace.getTracerProvider() as TracerProviderLike & { getDelegate?: () => object };
  // The global tracer provider is a proxy; its delegate is the API's NoopTracerProvider until an SDK registers one.
  const tracing = (provider.getDelegate?.() ?? provider).constructor.name !== 'NoopTracerProvider';
  // The API's no-op meter provider hands out its one no-op meter.
  const metering = api.metrics.getMeterProvider().getMeter(INSTRUMENTATION_SCOPE) !== api.createNoopMeter();
  return tracing || metering;
}

/** The API's `SpanKind` and `SpanStatusCode` values (stable in the specification). */
const SPAN_KIND = { internal: 0, client: 2, consumer: 4 } as const;
const STATUS = { error: 2 } as const;

class OtelTelemetry implements Telemetry {
  readonly enabled = true;
  readonly api: OtelApi;
  readonly tracer: OtelTracer;
  readonly meter: OtelMeter;
  readonly stepAttempts: OtelCounter;
  readonly stepDuration: OtelHistogram;
  readonly crashes: OtelCounter;
  readonly leaseLosses: OtelCounter;
  readonly reconciliations: OtelCounter;

  constructor(api: OtelApi, options: TelemetryOptions) {
    this.api = api;
    this.tracer = (options.tracerProvider ?? api.trace.getTracerProvider()).getTracer(INSTRUMENTATION_SCOPE);
    this.meter = (options.meterProvider ?? api.metrics.getMeterProvider()).getMeter(INSTRUMENTATION_SCOPE);
    const meter = this.meter;
    this.stepAttempts = meter.createCounter(METRIC.stepAttempts, {
      description: 'Step attempts that ended, by outcome',
      unit: '{attempt}',
    });
    this.stepDuration = meter.createHistogram(METRIC.stepDuration, {
      description: 'How long a step attempt took',
      unit: 'ms',
    });
    this.crashes = meter.createCounter(METRIC.crashes, {
      description: 'Step attempts that crashed their worker',
      unit: '{attempt}',
    });
    this.leaseLosses = meter.createCounter(METRIC.leaseLosses, {
      description: 'Leases a worker lost while driving a run',
      unit: '{lease}',
    });
    this.reconciliations = meter.createCounter(METRIC.reconciliations, {
      description: 'Reconcile lookups, by outcome',
      unit: '{lookup}',
    });
  }

  runStarted(run: LeasedRun, workerId: string): RunTrace {
    return new OtelRunTrace(this, run, workerId);
  }

  captureContext(): Json | null {
    return captureTraceContext(this.api, this.api.context.active());
  }

  reconcile<T extends { readonly status: string } | undefined>(
    subject: ReconcileSubject,
    lookup: () => Promise<T>,
  ): Promise<T> {
    const parent =
      subject.by === 'pass' ? restoreTraceContext(this.api, subject.traceContext) : this.api.context.active();
    return this.reconcileUnder(parent, subject, lookup);
  }

  async reconcileUnder<T extends { readonly status: string } | undefined>(
    parent: OtelContext,
    subject: ReconcileSubject,
    lookup: () => Promise<T>,
  ): Promise<T> {
    const api = this.api;
    const span = this.tracer.startSpan(
      SPAN.reconcile(subject.step),
      {
        kind: SPAN_KIND.client,
        attributes: {
          [ATTR.runId]: subject.runId,
          [ATTR.workflow]: subject.workflow,
          [ATTR.workflowVersion]: subject.workflowVersion,
          [ATTR.step]: subject.step,
          [ATTR.idempotencyKey]: subject.key,
          [ATTR.intentAttempt]: subject.intentAttempt,
          [ATTR.reconcileBy]: subject.by,
        },
      },
      parent,
    );
    let outcome = 'error';
    try {
      const result = await api.context.with(api.trace.setSpan(parent, span), lookup);
      outcome = typeof result?.status === 'string' ? result.status : 'invalid';
      return result;
    } catch (error) {
      recordError(span, error);
      throw error;
    } finally {
      span.setAttribute(ATTR.reconcileOutcome, outcome);
      span.end();
      this.reconciliations.add(1, {
        [ATTR.workflow]: subject.workflow,
        [ATTR.step]: subject.step,
        [ATTR.reconcileOutcome]: outcome,
        [ATTR.reconcileBy]: subject.by,
      });
    }
  }

  observeDatabase(db: Kysely<LedgerflowDatabase>): () => void {
    return observeDatabaseGauges(this.meter, db);
  }
}

/** How a step attempt ended, from the event that ended it. */
const STEP_ENDS: Partial<Record<WorkerEvent['type'], string>> = {
  'run-parked': 'parked',
  'run-waiting': 'waiting',
  'run-rescheduled': 'rescheduled',
  'run-deadline-exceeded': 'deadline-exceeded',
};

/** How a flight ended, from its last telling event. */
const RUN_ENDS: Partial<Record<WorkerEvent['type'], string>> = {
  'run-completed': 'completed',
  'run-compensating': 'compensating',
  'run-compensated': 'compensated',
  'run-released': 'released',
  'run-parked': 'parked',
  'run-waiting': 'waiting',
  'run-rescheduled': 'rescheduled',
  'run-deadline-exceeded': 'deadline-exceeded',
  'lease-lost': 'lease-lost',
};

class OtelRunTrace implements RunTrace {
  readonly #t: OtelTelemetry;
  readonly #span: OtelSpan;
  readonly #context: OtelContext;
  readonly #run: LeasedRun;
  readonly #workflow: string;
  #step: OtelStepTrace | undefined;
  /** Steps whose results wait for the run's next commit (`stepCarried`), their spans still open. */
  #carried: OtelStepTrace[] = [];
  #outcome = 'abandoned';

  constructor(t: OtelTelemetry, run: LeasedRun, workerId: string) {
    this.#t = t;
    this.#run = run;
    this.#workflow = run.workflowName;
    // Always an explicit parent: the flight may be launched from inside another run's span (a fused claim).
    const parent = restoreTraceContext(t.api, run.traceContext);
    this.#span = t.tracer.startSpan(
      SPAN.run(run.workflowName),
      {
        kind: SPAN_KIND.consumer,
        attributes: { ...runAttributes(run), [ATTR.workerId]: workerId, [ATTR.tookOver]: run.tookOver },
      },
      parent,
    );
    this.#context = t.api.trace.setSpan(parent, this.#span);
    if (run.tookOver) t.crashes.add(1, { [ATTR.workflow]: run.workflowName, [ATTR.crashKind]: 'abandoned' });
  }

  within<R>(fn: () => R): R {
    return this.#t.api.context.with(this.#context, fn);
  }

  stepStarted(step: StepDefinition, attempt: number): StepTrace {
    this.#step?.end('resync');
    this.#step = new OtelStepTrace(this.#t, this.#context, this.#run, step, attempt);
    return this.#step;
  }

  stepCarried(): void {
    const step = this.#step;
    if (step === undefined) return;
    step.carried();
    this.#carried.push(step);
    this.#step = undefined;
  }

  observe(event: WorkerEvent): void {
    // A carried step's events come with the commit that carried it, while a later step's span is open.
    const carried =
      'step' in event && event.step !== null ? this.#carried.find((c) => c.name === event.step) : undefined;
    const step = carried ?? this.#step;
    if (event.type === 'lease-lost' || event.type === 'error') this.#endCarried(event.type);
    switch (event.type) {
      case 'step-succeeded':
        step?.end(event.reused ? 'reused' : 'succeeded');
        break;
      case 'step-skipped':
        step?.end('skipped');
        break;
      case 'step-failed':
        step?.end(event.outcome.kind, { error: event.error, phase: event.phase });
        // retry, failed or parked (a run-parked follows); only a failed run is an error of the run.
        this.#outcome = event.outcome.kind;
        if (event.outcome.kind === 'failed') this.#span.setStatus({ code: STATUS.error, message: event.error.message });
        return;
      case 'step-crashed':
        this.#t.crashes.add(1, {
          [ATTR.workflow]: this.#workflow,
          [ATTR.step]: event.step,
          [ATTR.crashKind]: 'repeated',
        });
        this.#outcome = `crashed-${event.outcome.kind}`;
        return;
      case 'lease-lost':
        step?.end('lease-lost', {
          error: { name: 'LeaseLostError', message: `the lease (fencing token ${event.fencingToken}) was lost` },
        });
        this.#t.leaseLosses.add(1, { [ATTR.workflow]: this.#workflow });
        break;
      case 'error':
        step?.end('error', { error: event.error });
        this.#outcome = 'error';
        this.#span.setStatus({ code: STATUS.error, message: event.error.message });
        recordError(this.#span, event.error);
        return;
      default: {
        const ended = STEP_ENDS[event.type];
        if (ended !== undefined) step?.end(ended);
      }
    }
    this.#outcome = RUN_ENDS[event.type] ?? this.#outcome;
  }

  failed(error: unknown): void {
    this.#step?.end('error', { error: asException(error) });
    this.#outcome = 'error';
    this.#span.setStatus({ code: STATUS.error, message: asException(error).message });
    recordError(this.#span, error);
  }

  #endCarried(outcome: string): void {
    for (const c of this.#carried) c.end(outcome);
    this.#carried = [];
  }

  end(): void {
    this.#step?.end('abandoned');
    this.#endCarried('abandoned');
    this.#span.setAttribute(ATTR.runOutcome, this.#outcome);
    this.#span.end();
  }
}

class OtelStepTrace implements StepTrace {
  readonly #t: OtelTelemetry;
  readonly #span: OtelSpan;
  readonly #context: OtelContext;
  readonly #metricAttributes: OtelAttributes;
  readonly #started = performance.now();
  readonly #run: LeasedRun;
  readonly #step: StepDefinition;
  #ended = false;
  /** When the handler of a carried step finished (`performance.now()`): its span's end and duration. */
  #finished: number | undefined;

  constructor(t: OtelTelemetry, parent: OtelContext, run: LeasedRun, step: StepDefinition, attempt: number) {
    this.#t = t;
    this.#run = run;
    this.#step = step;
    this.#metricAttributes = { [ATTR.workflow]: run.workflowName, [ATTR.step]: step.name, [ATTR.stepKind]: step.kind };
    this.#span = t.tracer.startSpan(
      SPAN.step(step.name),
      {
        kind: SPAN_KIND.internal,
        attributes: {
          ...this.#metricAttributes,
          [ATTR.runId]: run.id,
          [ATTR.workflowVersion]: run.workflowVersion,
          [ATTR.fencingToken]: run.fencingToken,
          [ATTR.attempt]: attempt,
        },
      },
      parent,
    );
    this.#context = t.api.trace.setSpan(parent, this.#span);
  }

  within<A, R>(fn: (arg: A) => R, arg: A): R {
    return this.#t.api.context.with(this.#context, fn, undefined, arg);
  }

  keyed(key: string): void {
    this.#span.setAttribute(ATTR.idempotencyKey, key);
  }

  async perform<R>(key: string, call: () => Promise<R>): Promise<R> {
    const { api, tracer } = this.#t;
    const span = tracer.startSpan(
      SPAN.perform(this.#step.name),
      {
        kind: SPAN_KIND.client,
        attributes: { ...this.#metricAttributes, [ATTR.runId]: this.#run.id, [ATTR.idempotencyKey]: key },
      },
      this.#context,
    );
    try {
      return await api.context.with(api.trace.setSpan(this.#context, span), call);
    } catch (error) {
      const phase = error instanceof StepFailure ? error.phase : undefined;
      if (phase !== undefined) span.setAttribute(ATTR.failurePhase, phase);
      recordError(span, error);
      throw error;
    } finally {
      span.end();
    }
  }

  reconcile<T extends { readonly status: string } | undefined>(
    key: string,
    intentAttempt: number,
    lookup: () => Promise<T>,
  ): Promise<T> {
    const run = this.#run;
    return this.#t.reconcileUnder(
      this.#context,
      {
        runId: run.id,
        workflow: run.workflowName,
        workflowVersion: run.workflowVersion,
        step: this.#step.name,
        key,
        intentAttempt,
        by: 'attempt',
      },
      lookup,
    );
  }

  carrier(): Json | null {
    return captureTraceContext(this.#t.api, this.#context);
  }

  get name(): string {
    return this.#step.name;
  }

  carried(): void {
    this.#finished = performance.now();
  }

  end(outcome: string, failure?: { readonly error: SerializedError; readonly phase?: FailurePhase }): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#span.setAttribute(ATTR.stepOutcome, outcome);
    if (failure !== undefined) {
      if (failure.phase !== undefined) this.#span.setAttribute(ATTR.failurePhase, failure.phase);
      this.#span.setStatus({ code: STATUS.error, message: failure.error.message });
      this.#span.recordException(failure.error);
    }
    const finished = this.#finished ?? performance.now();
    if (this.#finished === undefined) this.#span.end();
    else this.#span.end(performance.timeOrigin + finished);
    const attributes = { ...this.#metricAttributes, [ATTR.stepOutcome]: outcome };
    this.#t.stepAttempts.add(1, attributes);
    this.#t.stepDuration.record(finished - this.#started, attributes);
  }
}

/** Status ERROR and an `exception` event (the cause of a step failure, not its wrapper). */
function recordError(span: OtelSpan, error: unknown): void {
  const exception = asException(error);
  span.setStatus({ code: STATUS.error, message: exception.message });
  span.recordException(exception);
}

function asException(error: unknown): { name: string; message: string; stack?: string } {
  const cause = error instanceof StepFailure ? error.cause : error;
  if (cause instanceof Error)
    return cause.stack === undefined
      ? { name: cause.name, message: cause.message }
      : { name: cause.name, message: cause.message, stack: cause.stack };
  if (typeof cause === 'object' && cause !== null && 'message' in cause && typeof cause.message === 'string') {
    const name = 'name' in cause && typeof cause.name === 'string' ? cause.name : 'Error';
    const stack = 'stack' in cause && typeof cause.stack === 'string' ? cause.stack : undefined;
    return stack === undefined ? { name, message: cause.message } : { name, message: cause.message, stack };
  }
  return { name: 'Error', message: String(cause) };
}
