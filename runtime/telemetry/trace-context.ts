/**
 * The trace a run continues: captured where the run is started, stored in
 * `workflow_run.trace_context` (core 0009), restored by every claim of the run.
 *
 * Captured with the API's propagator (whatever the application registered: W3C by default in the
 * SDKs, B3, …) into a plain carrier object. When no propagator is registered the API's is a no-op
 * and writes nothing; then, if a span is active, ledgerflow writes the W3C `traceparent` itself, so
 * that registering a tracer provider alone (without a propagator) still connects the run to its
 * start. Restoring mirrors it: the API's propagator first, then ledgerflow's W3C reading.
 */

import type { Json } from '../store/tables.js';
import type { OtelApi, OtelContext } from './otel-api.js';

/** The carrier of `active` (the context active now, or a span's); `null` when there is nothing to continue. */
export function captureTraceContext(api: OtelApi, active: OtelContext): Json | null {
  const carrier: Record<string, string> = {};
  api.propagation.inject(active, carrier);
  if (Object.keys(carrier).length === 0) {
    const span = api.trace.getSpanContext(active);
    if (span === undefined || !api.trace.isSpanContextValid(span)) return null;
    carrier['traceparent'] =
      `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
  }
  return carrier;
}

/** The context a stored carrier stands for, as the parent of a new span; ROOT when there is none. */
export function restoreTraceContext(api: OtelApi, stored: Json | null | undefined): OtelContext {
  if (stored === null || stored === undefined || typeof stored !== 'object' || Array.isArray(stored))
    return api.ROOT_CONTEXT;
  const carrier: Record<string, string> = {};
  for (const [name, value] of Object.entries(stored)) if (typeof value === 'string') carrier[name] = value;
  const extracted = api.propagation.extract(api.ROOT_CONTEXT, carrier);
  if (api.trace.getSpanContext(extracted) !== undefined) return extracted;
  const parsed = TRACEPARENT.exec(carrier['traceparent'] ?? '');
  if (parsed === null) return api.ROOT_CONTEXT;
  const [, traceId, spanId, flags] = parsed as unknown as [string, string, string, string];
  const spanContext = { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true };
  return api.trace.isSpanContextValid(spanContext)
    ? api.trace.setSpanContext(api.ROOT_CONTEXT, spanContext)
    : api.ROOT_CONTEXT;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
