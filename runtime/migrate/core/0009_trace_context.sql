-- ledgerflow core migration 0009: the trace a run continues.
--
-- trace_context   the OpenTelemetry context that was active where the run was started
--                 (client.start / startInTransaction), as the carrier the propagator wrote:
--                 {"traceparent": "00-<trace id>-<span id>-<flags>", "tracestate": "…"} for W3C
--                 trace context. Every claim's "run" span continues it (its parent is that span),
--                 so a run that lasts days across workers stays in the trace of the request that
--                 started it. NULL when nothing was traced at the start (or no OpenTelemetry API
--                 was installed): the worker then starts a new trace per claim. A child run
--                 (child/forEach) stores the span of the step that started it, or, untraced, its
--                 parent's trace_context.
-- Never read by a claim's WHERE clause: no index.

ALTER TABLE ledgerflow.workflow_run ADD COLUMN trace_context jsonb;
