/**
 * The part of `@opentelemetry/api` ledgerflow uses, as its own small structural types, and the
 * one place that loads the API.
 *
 * `@opentelemetry/api` is an OPTIONAL peer dependency: ledgerflow must run (and a project must
 * compile) without it. So nothing here imports it statically, not even its types — a project
 * that compiles ledgerflow's sources without the package installed would fail on a type import.
 * The API's own objects (`trace`, a `TracerProvider`, a `MeterProvider`…) satisfy these shapes;
 * `tests/runtime/telemetry.test.ts` assigns the real ones to them, so a drift is a compile error.
 *
 * Loading: {@link loadOtelApi} imports the package once per process (a dynamic `import()` with
 * a specifier the compiler does not resolve) and caches the answer. Unavailable → `undefined`,
 * and ledgerflow's telemetry is the no-op (`telemetry.ts`).
 */

export type OtelAttributeValue = string | number | boolean;
export type OtelAttributes = Readonly<Record<string, OtelAttributeValue | undefined>>;

/** An opaque `Context` of the API. */
export interface OtelContext {
  getValue(key: symbol): unknown;
}

export interface OtelSpanContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
}

export interface OtelSpan {
  spanContext(): OtelSpanContext;
  setAttribute(key: string, value: OtelAttributeValue): unknown;
  setAttributes(attributes: OtelAttributes): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: { name: string; message: string; stack?: string }): void;
  /** `endTime`: milliseconds since the epoch (default: now). */
  end(endTime?: number): void;
}

export interface OtelSpanOptions {
  kind?: number;
  attributes?: OtelAttributes;
}

export interface OtelTracer {
  startSpan(name: string, options?: OtelSpanOptions, context?: OtelContext): OtelSpan;
}

export interface TracerProviderLike {
  getTracer(name: string, version?: string): OtelTracer;
}

export interface OtelCounter {
  add(value: number, attributes?: OtelAttributes): void;
}

export interface OtelHistogram {
  record(value: number, attributes?: OtelAttributes): void;
}

/** An observable instrument (here: gauges), observed in a batch callback. */
export type OtelObservable = object;

export interface OtelBatchObservableResult {
  observe(observable: OtelObservable, value: number, attributes?: OtelAttributes): void;
}

export type OtelBatchObservableCallback = (result: OtelBatchObservableResult) => void | Promise<void>;

export interface OtelMeter {
  createCounter(name: string, options?: { description?: string; unit?: string }): OtelCounter;
  createHistogram(name: string, options?: { description?: string; unit?: string }): OtelHistogram;
  createObservableGauge(name: string, options?: { description?: string; unit?: string }): OtelObservable;
  addBatchObservableCallback(callback: OtelBatchObservableCallback, observables: OtelObservable[]): void;
  removeBatchObservableCallback(callback: OtelBatchObservableCallback, observables: OtelObservable[]): void;
}

export interface MeterProviderLike {
  getMeter(name: string, version?: string): OtelMeter;
}

export interface OtelTextMapSetter {
  set(carrier: Record<string, string>, key: string, value: string): void;
}

/** The module namespace of `@opentelemetry/api`, as far as ledgerflow uses it. */
export interface OtelApi {
  readonly trace: {
    getTracerProvider(): TracerProviderLike;
    setSpan(context: OtelContext, span: OtelSpan): OtelContext;
    getSpanContext(context: OtelContext): OtelSpanContext | undefined;
    setSpanContext(context: OtelContext, spanContext: OtelSpanContext & { isRemote?: boolean }): OtelContext;
    isSpanContextValid(spanContext: OtelSpanContext): boolean;
  };
  readonly metrics: { getMeterProvider(): MeterProviderLike };
  createNoopMeter(): OtelMeter;
  readonly context: {
    active(): OtelContext;
    with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
      context: OtelContext,
      fn: F,
      thisArg?: ThisParameterType<F>,
      ...args: A
    ): ReturnType<F>;
  };
  readonly propagation: {
    inject(context: OtelContext, carrier: Record<string, string>): void;
    extract(context: OtelContext, carrier: Readonly<Record<string, string>>): OtelContext;
  };
  readonly ROOT_CONTEXT: OtelContext;
}

/** How the API is imported; tests pass one that fails to exercise the fallback. */
export type OtelImporter = () => Promise<unknown>;

/** Not a literal in `import()`: the compiler must not resolve it (the package may be absent). */
const OTEL_API = '@opentelemetry/api';
const importOtelApi: OtelImporter = () => import(OTEL_API);

let loaded: Promise<OtelApi | undefined> | undefined;

/**
 * `@opentelemetry/api` if it can be imported, else `undefined`. With the default importer the
 * import happens once per process.
 */
export function loadOtelApi(importer?: OtelImporter): Promise<OtelApi | undefined> {
  if (importer !== undefined) return tryImport(importer);
  loaded ??= tryImport(importOtelApi);
  return loaded;
}

async function tryImport(importer: OtelImporter): Promise<OtelApi | undefined> {
  let namespace: unknown;
  try {
    namespace = await importer();
  } catch {
    // Not installed (or not loadable here): telemetry is off; nothing else depends on it.
    return undefined;
  }
  for (const candidate of [namespace, (namespace as { default?: unknown } | null)?.default]) {
    if (isOtelApi(candidate)) return candidate;
  }
  return undefined;
}

function isOtelApi(value: unknown): value is OtelApi {
  const api = value as Partial<OtelApi> | null | undefined;
  return (
    typeof api?.trace?.getTracerProvider === 'function' &&
    typeof api.metrics?.getMeterProvider === 'function' &&
    typeof api.context?.with === 'function' &&
    typeof api.propagation?.inject === 'function' &&
    api.ROOT_CONTEXT !== undefined
  );
}
