import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as otel from '@opentelemetry/api';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { MetricReader, MeterProvider, type DataPoint, type Histogram } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createClient,
  createWorker,
  type MeterProviderLike,
  type TracerProviderLike,
  type Worker,
  type WorkerOptions,
} from 'ledgerflow/runtime';
import { runReconcilePass, TELEMETRY_ATTRIBUTES as ATTR, TELEMETRY_METRICS as METRIC } from 'ledgerflow/operator';
import { configureFaults } from 'ledgerflow/testing';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { loadOtelApi, type OtelApi } from '../../runtime/telemetry/otel-api.js';
import { NO_TELEMETRY } from '../../runtime/telemetry/telemetry.js';
import { loadTelemetry, loadWorkerTelemetry } from '../../runtime/telemetry/otel-telemetry.js';
import { captureTraceContext, restoreTraceContext } from '../../runtime/telemetry/trace-context.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { eventLog, runState, setupAppSchema } from './fixtures/run-helpers.js';
import {
  flakyHandlers,
  mixedHandlers,
  receiptControl,
  receiptHandlers,
  twoStepsHandlers,
} from './fixtures/test-handlers.js';
import { ALL_TEST_WORKFLOWS, flaky, mixed, receipt, twoSteps } from './fixtures/test-workflows.js';
import { fanOut, WAIT_WORKFLOWS, waitHandlers, withChild } from './fixtures/wait-workflows.js';

// The real API and SDK objects fit ledgerflow's own structural types (a drift is a compile error here).
const apiFits: OtelApi = otel;
const tracerFits: TracerProviderLike = new BasicTracerProvider();
const meterFits: MeterProviderLike = new MeterProvider();
void [apiFits, tracerFits, meterFits];

/** A pull reader: `collect()` on demand, as an exporter's reader would at its interval. */
class TestReader extends MetricReader {
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterAll(() => {
  context.disable();
  propagation.disable();
});

const LATER = (): Date => new Date(Date.now() + 3_600_000);

describeStores('OpenTelemetry: spans, trace context and metrics of a worker', (getStore) => {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new TestReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const app = tracerProvider.getTracer('the-application');
  const workers: Worker[] = [];
  const worker = (options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({
      store: getStore(),
      pollIntervalMs: 20,
      leaseMs: 5_000,
      reconcileIntervalMs: 0,
      telemetry: { tracerProvider, meterProvider },
      ...options,
    });
    workers.push(w);
    return w;
  };
  /** Starts a run inside an active span of the application, as a request handler would. */
  const startInRequest = (name: string, start: () => Promise<{ runId: string }>) =>
    app.startActiveSpan(name, async (span) => {
      try {
        return { runId: (await start()).runId, request: span.spanContext() };
      } finally {
        span.end();
      }
    });
  const spansOf = (runId: string, prefix: string): ReadableSpan[] =>
    exporter.getFinishedSpans().filter((s) => s.name.startsWith(prefix) && s.attributes[ATTR.runId] === runId);
  const points = async (name: string, where: Record<string, string>): Promise<DataPoint<number | Histogram>[]> => {
    const { resourceMetrics } = await reader.collect();
    return resourceMetrics.scopeMetrics
      .flatMap((scope) => scope.metrics)
      .filter((metric) => metric.descriptor.name === name)
      .flatMap((metric) => metric.dataPoints as DataPoint<number | Histogram>[])
      .filter((point) => Object.entries(where).every(([key, value]) => point.attributes[key] === value));
  };
  const countBy = async (name: string, where: Record<string, string>, by: string): Promise<Record<string, number>> =>
    Object.fromEntries((await points(name, where)).map((p) => [String(p.attributes[by]), p.value as number]));

  beforeAll(async () => {
    await migrateForTest(getStore(), [...ALL_TEST_WORKFLOWS, ...WAIT_WORKFLOWS]);
    await setupAppSchema(getStore());
  });
  afterEach(async () => {
    configureFaults(undefined);
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
  });
  afterAll(async () => {
    await tracerProvider.shutdown();
    await meterProvider.shutdown();
  });

  it('a run started inside a request continues its trace: run, step and perform spans with their attributes, and step metrics', async () => {
    const store = getStore();
    const client = createClient({ store });
    const { runId, request } = await startInRequest('POST /orders', () =>
      client.start(mixed, { orderId: 'otel-mixed', quantity: 2, email: 'a@example.com' }),
    );
    const stored = (await runState(store, runId)).run.trace_context as { traceparent: string };
    expect(stored.traceparent).toBe(`00-${request.traceId}-${request.spanId}-01`);

    await worker({ workflows: [mixedHandlers(new FakePaymentProvider(), new FakeEmailProvider())] }).drain();

    const [run, ...more] = spansOf(runId, 'ledgerflow.run ');
    expect(more).toEqual([]);
    expect(run!.name).toBe('ledgerflow.run wt-mixed');
    expect(run!.spanContext().traceId).toBe(request.traceId);
    expect(run!.parentSpanContext?.spanId).toBe(request.spanId);
    expect(run!.attributes).toMatchObject({
      [ATTR.runId]: runId,
      [ATTR.workflow]: 'wt-mixed',
      [ATTR.workflowVersion]: 1,
      [ATTR.fencingToken]: 1,
      [ATTR.runOutcome]: 'completed',
      [ATTR.tookOver]: false,
    });
    expect(run!.attributes[ATTR.workerId]).toEqual(expect.any(String));

    const steps = spansOf(runId, 'ledgerflow.step ');
    expect(
      steps.map((s) => [
        s.name,
        s.attributes[ATTR.stepKind],
        s.attributes[ATTR.attempt],
        s.attributes[ATTR.stepOutcome],
        s.attributes[ATTR.idempotencyKey],
      ]),
    ).toEqual([
      ['ledgerflow.step price', 'step', 1, 'succeeded', undefined],
      ['ledgerflow.step reserve', 'transactional', 1, 'succeeded', 'reserve:otel-mixed'],
      ['ledgerflow.step charge', 'external', 1, 'succeeded', 'charge:otel-mixed'],
      ['ledgerflow.step receipt', 'external', 1, 'succeeded', 'receipt:otel-mixed'],
    ]);
    for (const step of steps) {
      expect(step.parentSpanContext?.spanId).toBe(run!.spanContext().spanId);
      expect(step.spanContext().traceId).toBe(request.traceId);
      expect(step.attributes[ATTR.workflow]).toBe('wt-mixed');
    }
    const performs = spansOf(runId, 'ledgerflow.perform ');
    expect(performs.map((s) => [s.name, s.attributes[ATTR.idempotencyKey], s.status.code])).toEqual([
      ['ledgerflow.perform charge', 'charge:otel-mixed', otel.SpanStatusCode.UNSET],
      ['ledgerflow.perform receipt', 'receipt:otel-mixed', otel.SpanStatusCode.UNSET],
    ]);
    expect(performs[0]!.parentSpanContext?.spanId).toBe(steps[2]!.spanContext().spanId);
    expect(performs[1]!.parentSpanContext?.spanId).toBe(steps[3]!.spanContext().spanId);

    expect(await countBy(METRIC.stepAttempts, { [ATTR.workflow]: 'wt-mixed' }, ATTR.step)).toEqual({
      price: 1,
      reserve: 1,
      charge: 1,
      receipt: 1,
    });
    const durations = await points(METRIC.stepDuration, {
      [ATTR.workflow]: 'wt-mixed',
      [ATTR.stepOutcome]: 'succeeded',
    });
    expect(durations.map((p) => (p.value as Histogram).count)).toEqual([1, 1, 1, 1]);
    expect(durations.every((p) => (p.value as Histogram).sum! > 0)).toBe(true);
  });

  it('a failed attempt is an ERROR span with its exception and failure phase; the retry is a second claim', async () => {
    const store = getStore();
    const { runId } = await createClient({ store }).start(flaky, { failTimes: 1, error: 'plain' });
    await worker({ workflows: [flakyHandlers(new Map())] }).drain();

    const steps = spansOf(runId, 'ledgerflow.step work');
    expect(steps.map((s) => [s.attributes[ATTR.attempt], s.attributes[ATTR.stepOutcome], s.status.code])).toEqual([
      [1, 'retry', otel.SpanStatusCode.ERROR],
      [2, 'succeeded', otel.SpanStatusCode.UNSET],
    ]);
    expect(steps[0]!.status.message).toBe('transient failure on call 1');
    expect(steps[0]!.attributes[ATTR.failurePhase]).toBe('other');
    expect(steps[0]!.events.map((e) => [e.name, e.attributes?.['exception.message']])).toEqual([
      ['exception', 'transient failure on call 1'],
    ]);
    const runs = spansOf(runId, 'ledgerflow.run ');
    expect(runs.map((s) => [s.attributes[ATTR.fencingToken], s.attributes[ATTR.runOutcome]])).toEqual([
      [1, 'retry'],
      [2, 'completed'],
    ]);
    expect(await countBy(METRIC.stepAttempts, { [ATTR.workflow]: 'wt-flaky' }, ATTR.stepOutcome)).toEqual({
      retry: 1,
      succeeded: 1,
    });
  });

  it('a claim that takes over a crashed attempt says so on the run span and counts the crash', async () => {
    const store = getStore();
    const { runId } = await createClient({ store }).start(twoSteps, { n: 3 });
    // What a worker that died in the step leaves: a running attempt under an expired lease.
    await sql`UPDATE ledgerflow.workflow_run
                 SET status = 'running', lease_owner = 'dead-worker', lease_expires_at = now() - interval '1 second', fencing_token = 1
               WHERE id = ${runId}`.execute(store.db);
    await sql`INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id)
              VALUES (${runId}, 'double', 1, 'running', 1, 'dead-worker')`.execute(store.db);
    const log = eventLog();
    await worker({ workflows: [twoStepsHandlers()], onEvent: log.onEvent }).drain();

    expect(log.events.find((e) => e.type === 'run-claimed' && e.runId === runId)).toMatchObject({
      tookOver: true,
      attempt: 2,
    });
    const [run] = spansOf(runId, 'ledgerflow.run ');
    expect(run!.attributes).toMatchObject({
      [ATTR.tookOver]: true,
      [ATTR.fencingToken]: 2,
      [ATTR.runOutcome]: 'completed',
    });
    expect(spansOf(runId, 'ledgerflow.step double').map((s) => s.attributes[ATTR.attempt])).toEqual([2]);
    expect(await countBy(METRIC.crashes, { [ATTR.workflow]: 'wt-two-steps' }, ATTR.crashKind)).toEqual({
      abandoned: 1,
    });
  });

  it("the next attempt's reconcile is a child of its step span; an error after perform is recorded with its phase", async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    configureFaults({ seed: 11, points: { 'after-perform': { probability: 1, actions: ['throw'], times: 1 } } });
    const { runId } = await createClient({ store }).start(receipt, { orderId: 'otel-rc', email: 'a@example.com' });
    await worker({ workflows: [receiptHandlers(email)] }).drain();

    const steps = spansOf(runId, 'ledgerflow.step receipt');
    expect(
      steps.map((s) => [s.attributes[ATTR.attempt], s.attributes[ATTR.stepOutcome], s.attributes[ATTR.failurePhase]]),
    ).toEqual([
      [1, 'retry', 'after-perform'],
      [2, 'succeeded', undefined],
    ]);
    const [lookup, ...others] = spansOf(runId, 'ledgerflow.reconcile ');
    expect(others).toEqual([]);
    expect(lookup!.parentSpanContext?.spanId).toBe(steps[1]!.spanContext().spanId);
    expect(lookup!.attributes).toMatchObject({
      [ATTR.step]: 'receipt',
      [ATTR.idempotencyKey]: 'receipt:otel-rc',
      [ATTR.intentAttempt]: 1,
      [ATTR.reconcileBy]: 'attempt',
      [ATTR.reconcileOutcome]: 'found',
    });
    expect(email.sentForReference('receipt:otel-rc')).toBe(1);
    expect(
      await countBy(
        METRIC.reconciliations,
        { [ATTR.workflow]: 'wt-receipt', [ATTR.reconcileBy]: 'attempt' },
        ATTR.reconcileOutcome,
      ),
    ).toEqual({
      found: 1,
    });
  });

  it("gauges read open intents and queue depth at collection; a reconcile pass's lookup continues the run's trace", async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const control = receiptControl();
    control.reconcile = 'unknown';
    configureFaults({ seed: 11, points: { 'after-perform': { probability: 1, actions: ['throw'], times: 1 } } });
    const { runId, request } = await startInRequest('POST /receipts', () =>
      createClient({ store }).start(receipt, { orderId: 'otel-pass', email: 'a@example.com' }),
    );
    await sql`INSERT INTO ledgerflow.queue (name) VALUES ('otel-idle'), ('otel-busy')`.execute(store.db);
    await sql`INSERT INTO ledgerflow.queue_partition (queue, partition, waiting, top_priority)
              VALUES ('otel-busy', '', 0, NULL), ('otel-busy', 'a', 2, 0), ('otel-busy', 'b', 3, 0)`.execute(store.db);
    const w = worker({ workflows: [receiptHandlers(email, control)] });
    await w.drain();
    expect((await runState(store, runId)).run.status).toBe('needs_reconciliation');

    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM ledgerflow.step_effect WHERE status = 'intent'`.execute(store.db);
    expect(rows[0]!.n).toBeGreaterThanOrEqual(1);
    expect((await points(METRIC.openIntents, {})).map((p) => p.value)).toEqual([rows[0]!.n]);
    const [age] = await points(METRIC.oldestIntentAge, {});
    expect(age!.value as number).toBeGreaterThan(0);
    expect(await countBy(METRIC.queueDepth, {}, ATTR.queue)).toMatchObject({ 'otel-idle': 0, 'otel-busy': 5 });
    await sql`DELETE FROM ledgerflow.queue WHERE name LIKE 'otel-%'`.execute(store.db);

    control.reconcile = 'lookup';
    const report = await runReconcilePass({
      store,
      workflows: [receiptHandlers(email, control)],
      now: LATER(),
      leaseMs: 5_000,
      telemetry: { tracerProvider, meterProvider },
    });
    expect(report).toMatchObject({ recorded: 1 });
    const passLookups = spansOf(runId, 'ledgerflow.reconcile ').filter(
      (s) => s.attributes[ATTR.reconcileBy] === 'pass',
    );
    expect(passLookups.map((s) => s.attributes[ATTR.reconcileOutcome])).toEqual(['found']);
    expect(passLookups[0]!.spanContext().traceId).toBe(request.traceId);
    expect(passLookups[0]!.parentSpanContext?.spanId).toBe(request.spanId);
    expect(
      await countBy(
        METRIC.reconciliations,
        { [ATTR.workflow]: 'wt-receipt', [ATTR.reconcileBy]: 'pass' },
        ATTR.reconcileOutcome,
      ),
    ).toEqual({
      found: 1,
    });
  });

  it('gauges read the database once per collection, and never without an SDK (the API alone is a no-op meter)', async () => {
    let reads = 0;
    const counting = getStore().db.withPlugin({
      transformQuery: (args) => {
        reads += 1;
        return args.node;
      },
      transformResult: async (args) => args.result,
    });
    const withoutSdk = await loadTelemetry({});
    expect(withoutSdk.enabled).toBe(true);
    const unobserveNoop = withoutSdk.observeDatabase(counting);
    const ownReader = new TestReader();
    const stop = (await loadTelemetry({ meterProvider: new MeterProvider({ readers: [ownReader] }) })).observeDatabase(
      counting,
    );
    try {
      await Promise.all([ownReader.collect(), ownReader.collect()]);
      await ownReader.collect();
      expect(reads).toBe(1);
    } finally {
      stop();
      unobserveNoop();
    }
    await ownReader.collect();
    expect(reads).toBe(1);
  });

  it("children continue the trace: each child's run span is a child of the forEach attempt that started it", async () => {
    const store = getStore();
    const client = createClient({ store });
    const { runId, request } = await startInRequest('POST /fan-out', () =>
      client.start(fanOut, { id: 'otel', count: 2, failAt: -1 }),
    );
    const traced = worker({ workflows: waitHandlers() });
    await traced.drain();
    await traced.stop();
    expect((await runState(store, runId)).run.status).toBe('completed');

    const [starter] = spansOf(runId, 'ledgerflow.step double');
    const children = await client.listRuns({ parentRunId: runId });
    expect(children).toHaveLength(2);
    for (const child of children) {
      const [childRun] = spansOf(child.id, 'ledgerflow.run ');
      expect(childRun!.name).toBe('ledgerflow.run wt-w-doubler');
      expect(childRun!.spanContext().traceId).toBe(request.traceId);
      expect(childRun!.parentSpanContext?.spanId).toBe(starter!.spanContext().spanId);
    }

    // Untraced, a child inherits the context its parent was started with.
    const untraced = await startInRequest('POST /child', () =>
      client.start(withChild, { id: 'otel-off', n: 2, fail: false }),
    );
    await worker({ workflows: waitHandlers(), telemetry: { enabled: false } }).drain();
    const parent = (await runState(store, untraced.runId)).run;
    const [child] = await client.listRuns({ parentRunId: untraced.runId });
    expect(parent.status).toBe('completed');
    expect(child!.trace_context).toEqual(parent.trace_context);
    expect(spansOf(untraced.runId, 'ledgerflow.')).toEqual([]);
  });

  it('startInTransaction captures the context too, and a run started outside any span stores none', async () => {
    const store = getStore();
    const client = createClient({ store });
    const { runId, request } = await startInRequest('POST /batch', () =>
      store.db.transaction().execute((trx) => client.startInTransaction(trx, twoSteps, { n: 1 })),
    );
    expect((await runState(store, runId)).run.trace_context).toEqual({
      traceparent: `00-${request.traceId}-${request.spanId}-01`,
    });
    const untraced = await client.start(twoSteps, { n: 2 });
    expect((await runState(store, untraced.runId)).run.trace_context).toBeNull();
    await Promise.all([client.cancel(runId), client.cancel(untraced.runId)]);
  });
});

describe('trace context without a registered propagator', () => {
  it('is written and read as W3C traceparent by ledgerflow itself', async () => {
    const api = (await loadOtelApi())!;
    propagation.disable();
    const injected: Record<string, string> = {};
    propagation.inject(context.active(), injected);
    expect(injected).toEqual({});
    const contexts = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(contexts);
    try {
      const provider = new BasicTracerProvider();
      const span = provider.getTracer('t').startSpan('request');
      const carrier = captureTraceContext(api, trace.setSpan(context.active(), span));
      const { traceId, spanId } = span.spanContext();
      expect(carrier).toEqual({ traceparent: `00-${traceId}-${spanId}-01` });
      const restored = trace.getSpanContext(restoreTraceContext(api, carrier) as otel.Context);
      expect(restored).toMatchObject({ traceId, spanId, isRemote: true });
      expect(restoreTraceContext(api, { traceparent: 'garbage' })).toBe(otel.ROOT_CONTEXT);
      expect(captureTraceContext(api, otel.ROOT_CONTEXT)).toBeNull();
    } finally {
      context.disable();
    }
  });
});

describe('a worker with the API installed but no SDK registered', () => {
  it('traces nothing (the no-op objects would only cost CPU), until a provider is registered or passed', async () => {
    expect(await loadWorkerTelemetry({})).toBe(NO_TELEMETRY);
    const passed = await loadWorkerTelemetry({ tracerProvider: new BasicTracerProvider() });
    expect(passed.enabled).toBe(true);
    try {
      trace.setGlobalTracerProvider(new BasicTracerProvider());
      expect((await loadWorkerTelemetry({})).enabled).toBe(true);
    } finally {
      trace.disable();
    }
    expect(await loadWorkerTelemetry({})).toBe(NO_TELEMETRY);
    try {
      otel.metrics.setGlobalMeterProvider(new MeterProvider());
      expect((await loadWorkerTelemetry({})).enabled).toBe(true);
    } finally {
      otel.metrics.disable();
    }
    // The client's capture of the active context needs no SDK: it loads the API regardless.
    expect((await loadTelemetry({})).enabled).toBe(true);
  });
});

describe('without @opentelemetry/api', () => {
  it('the loader falls back to no telemetry when the import fails', async () => {
    const missing = () =>
      Promise.reject(
        Object.assign(new Error("Cannot find package '@opentelemetry/api'"), { code: 'ERR_MODULE_NOT_FOUND' }),
      );
    expect(await loadOtelApi(missing)).toBeUndefined();
    expect(await loadTelemetry({}, missing)).toBe(NO_TELEMETRY);
    expect(await loadTelemetry({}, () => Promise.resolve({ something: 'else' }))).toBe(NO_TELEMETRY);
    expect((await loadTelemetry({})).enabled).toBe(true);
    expect(await loadTelemetry({ enabled: false })).toBe(NO_TELEMETRY);
  });

  describe('a worker in a process where the import fails', () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await createPgTestStore();
      await migrateForTest(store, ALL_TEST_WORKFLOWS);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('starts and drains runs, storing no trace context', async () => {
      const script = fileURLToPath(new URL('./fixtures/telemetry-without-otel.ts', import.meta.url));
      const hook = fileURLToPath(new URL('./fixtures/hide-otel-api.mjs', import.meta.url));
      const child = spawn(process.execPath, ['--import', 'tsx', '--import', hook, script], {
        cwd: fileURLToPath(new URL('../..', import.meta.url)),
        env: { ...process.env, DATABASE_URL: store.url! },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect(stderr).toBe('');
      expect(code).toBe(0);
      const result = JSON.parse(stdout) as { apiImport: string; runId: string; status: string };
      expect(result.apiImport).toMatch(/Cannot find package '@opentelemetry\/api'/);
      expect(result.status).toBe('completed');
      expect((await runState(store, result.runId)).run.trace_context).toBeNull();
    });
  });
});
