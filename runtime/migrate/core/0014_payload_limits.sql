-- ledgerflow core migration 0014: the largest run input, step output, event payload and error
-- record ledgerflow writes, one row for the whole database (`ledgerflow limits`).
--
-- Limits live here, not in a process: every client and worker of the database applies the same
-- ones, and `ledgerflow limits set` changes them for all of them at once (each reads this row
-- with a short cache, runtime/limits/limits-cache.ts). Sizes are bytes of the JSON text as the
-- client or worker serializes it, checked before anything is sent:
--   max_input_bytes          a run's input (client.start, children a step starts)
--   max_output_bytes         a step's output (the step fails, not retried)
--   max_event_payload_bytes  an event's payload (client.sendEvent)
--   max_error_bytes          an attempt's or run's error record: truncated, never refused (an
--                            error must always be recordable, or the failure would look like a crash)
-- The defaults: 1 MiB for data, 64 KiB for an error record. At most 256 MiB: jsonb's own limit
-- is about that, and anything near it belongs in object storage with a reference in the run.

CREATE TABLE ledgerflow.payload_limits (
    id                      boolean     PRIMARY KEY DEFAULT true CHECK (id),
    max_input_bytes         integer     NOT NULL DEFAULT 1048576 CHECK (max_input_bytes BETWEEN 64 AND 268435456),
    max_output_bytes        integer     NOT NULL DEFAULT 1048576 CHECK (max_output_bytes BETWEEN 64 AND 268435456),
    max_event_payload_bytes integer     NOT NULL DEFAULT 1048576 CHECK (max_event_payload_bytes BETWEEN 64 AND 268435456),
    max_error_bytes         integer     NOT NULL DEFAULT 65536 CHECK (max_error_bytes BETWEEN 1024 AND 16777216),
    updated_at              timestamptz NOT NULL DEFAULT statement_timestamp()
);

INSERT INTO ledgerflow.payload_limits DEFAULT VALUES;
