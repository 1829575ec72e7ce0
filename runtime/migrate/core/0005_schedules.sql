-- ledgerflow core migration 0005: schedules — a cron expression that starts one run of a
-- workflow per tick.
--
-- Workers register the schedules they are given (an upsert when they start; `paused` is never
-- touched by it). Any worker whose code has a schedule's current definition (definition_hash)
-- ticks it: it takes the row with FOR UPDATE SKIP LOCKED once next_tick_at has come (database
-- time), starts one run per due tick with the dedupe key `schedule:<name>:<tick ISO>`, and moves
-- next_tick_at past the database's now — in ONE transaction. Whoever gets the row next sees the
-- moved tick, so each tick starts one run, whatever the number of workers or their restarts.
--
-- next_tick_at   the first tick not processed yet (a tick of cron in timezone)
-- catch_up       what happens to ticks missed while no worker ran: 'skip', 'latest' or 'all'
--                (at most catch_up_max of them)
-- last_tick_at / last_run_id   the latest tick that started a run, and that run
-- last_error / failures / retry_at   a tick that could not start its run (its input function
--                threw, the input was invalid, the workflow is not migrated): the error, how
--                many times in a row, and when it is tried again (backoff)
-- registered_at  when a worker last registered the schedule (a schedule no worker registers
--                any more ticks no more)

CREATE TABLE ledgerflow.schedule (
    name             text        PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9._-]{0,62}$'),
    cron             text        NOT NULL,
    timezone         text        NOT NULL,
    workflow_name    text        NOT NULL,
    workflow_version integer     NOT NULL,
    catch_up         text        NOT NULL CHECK (catch_up IN ('skip', 'latest', 'all')),
    catch_up_max     integer     CHECK (catch_up_max >= 1),
    definition_hash  text        NOT NULL,
    paused           boolean     NOT NULL DEFAULT false,
    next_tick_at     timestamptz NOT NULL,
    last_tick_at     timestamptz,
    last_run_id      uuid        REFERENCES ledgerflow.workflow_run (id) ON DELETE SET NULL,
    last_error       jsonb,
    failures         integer     NOT NULL DEFAULT 0 CHECK (failures >= 0),
    retry_at         timestamptz,
    created_at       timestamptz NOT NULL DEFAULT statement_timestamp(),
    registered_at    timestamptz NOT NULL DEFAULT statement_timestamp(),
    FOREIGN KEY (workflow_name, workflow_version) REFERENCES ledgerflow.workflow_version (workflow_name, version),
    CHECK ((catch_up = 'all') = (catch_up_max IS NOT NULL))
);

-- What the tick loop reads at every pass: due, unpaused schedules, by next tick.
CREATE INDEX schedule_due_idx ON ledgerflow.schedule (next_tick_at) WHERE NOT paused;
