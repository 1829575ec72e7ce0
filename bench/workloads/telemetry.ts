import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import type { AnyWorkflow } from '../../dsl/index.js';
import type { Store, TelemetryOptions, WorkflowRegistration } from '../../runtime/index.js';
import { measureDrain } from './drain.js';

/**
 * W1 (the one-step drain) three ways, on the same machine in the same run:
 *   plain    telemetry off (`telemetry: { enabled: false }`): the path without @opentelemetry/api;
 *   no SDK   the API loaded, nothing registered: the API's own no-op tracer and meter;
 *   SDK      a BasicTracerProvider with a BatchSpanProcessor (an exporter that drops the spans after
 *            counting them), a MeterProvider with a periodic reader (1 s) into memory, and the
 *            AsyncLocalStorage context manager registered — what a traced deployment pays,
 *            without the network.
 * Rounds alternate the variants (plain, no SDK, SDK, plain, …) so drift hits all of them; each
 * variant reports its best round. Ratios are to plain.
 */
export interface TelemetryOverhead {
  readonly concurrency: number;
  readonly runs: number;
  readonly rounds: number;
  readonly variants: ReadonlyArray<{
    readonly variant: 'plain' | 'no SDK' | 'SDK';
    readonly stepsPerSecond: number;
    readonly cpuMsPerStep: number;
  }>;
  /** Spans the SDK variant exported per run (run + step): what its cost paid for. */
  readonly spansPerRun: number;
}

export interface TelemetryOverheadOptions {
  readonly workflow: AnyWorkflow;
  readonly registrations: readonly WorkflowRegistration[];
  readonly runs: number;
  readonly concurrency: number;
  readonly rounds: number;
  /** A fresh migrated database per measurement: its stores for enqueueing and for the worker (closed by the caller). */
  readonly stores: (
    label: string,
  ) => Promise<{ readonly enqueueStore: Store; readonly workerStore: Store; close(): Promise<void> }>;
}

class CountingExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (result: { code: number }) => void): void {
    this.spans += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

export async function measureTelemetryOverhead(o: TelemetryOverheadOptions): Promise<TelemetryOverhead> {
  const exporter = new CountingExporter();
  const results = {
    plain: [] as Array<{ s: number; cpu: number }>,
    'no SDK': [] as Array<{ s: number; cpu: number }>,
    SDK: [] as Array<{ s: number; cpu: number }>,
  };
  let sdkRuns = 0;
  for (let round = 0; round < o.rounds; round++) {
    for (const variant of ['plain', 'no SDK', 'SDK'] as const) {
      const stores = await o.stores(`telemetry_${variant.replace(' ', '_').toLowerCase()}_${round}`);
      let telemetry: TelemetryOptions;
      let shutdown = async (): Promise<void> => {};
      if (variant === 'plain') telemetry = { enabled: false };
      else if (variant === 'no SDK') telemetry = {};
      else {
        const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
        const meterProvider = new MeterProvider({
          readers: [
            new PeriodicExportingMetricReader({
              exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
              exportIntervalMillis: 1_000,
            }),
          ],
        });
        context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
        telemetry = { tracerProvider, meterProvider };
        shutdown = async () => {
          await tracerProvider.shutdown();
          await meterProvider.shutdown();
          context.disable();
        };
      }
      try {
        const m = await measureDrain({
          workflow: o.workflow,
          registrations: o.registrations,
          runs: o.runs,
          concurrency: o.concurrency,
          enqueueStore: stores.enqueueStore,
          workerStore: stores.workerStore,
          telemetry,
        });
        if (m.failedSteps > 0 || m.errors.length > 0)
          throw new Error(`telemetry ${variant}: ${m.failedSteps} failed steps; ${m.errors.join('; ')}`);
        results[variant].push({ s: m.seconds, cpu: m.cpuMs });
        if (variant === 'SDK') sdkRuns += o.runs;
      } finally {
        await shutdown();
        await stores.close();
      }
    }
  }
  const best = (rows: ReadonlyArray<{ s: number; cpu: number }>) => rows.reduce((a, b) => (b.s < a.s ? b : a));
  return {
    concurrency: o.concurrency,
    runs: o.runs,
    rounds: o.rounds,
    variants: (['plain', 'no SDK', 'SDK'] as const).map((variant) => {
      const { s, cpu } = best(results[variant]);
      return { variant, stepsPerSecond: o.runs / s, cpuMsPerStep: cpu / o.runs };
    }),
    spansPerRun: exporter.spans / sdkRuns,
  };
}
