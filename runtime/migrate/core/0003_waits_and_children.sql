-- ledgerflow core migration 0003: workflows that wait, branch and compose.
--
-- New step kinds: sleep, waitFor, child, forEach (carried out by the runtime, no handler, no
-- ledger row). A step may be skipped by its condition: step_result.skipped.
--
-- A waiting run (sleeping, waiting for an event or for its children) is `waiting`: it holds no
-- lease. `run_after` is when it must be looked at next (its wake-up time, its timeout, its
-- deadline, or `statement_timestamp()` when something woke it); the claim takes `pending` and
-- `waiting` runs from ONE partial index on run_after, so runs waiting far ahead cost rows, not
-- claim time. `waiting_for` says what for (shown by `ledgerflow runs` / `run`).
--
-- Run status machine additions:
--   running  --step suspends (sleep not due, no event yet, children unfinished)-->  waiting
--   waiting  --claim (due: woken, timed out, or past its deadline)-->  running
--   waiting  --cancel (client, deadline, parent failed or cancelled)-->  cancelled
-- Attempt status addition: running --step suspended the run--> suspended (counts nothing).

ALTER TABLE ledgerflow.workflow_step_def DROP CONSTRAINT workflow_step_def_kind_check;
ALTER TABLE ledgerflow.workflow_step_def ADD CONSTRAINT workflow_step_def_kind_check
    CHECK (kind IN ('step', 'transactional', 'external', 'sleep', 'waitFor', 'child', 'forEach'));

ALTER TABLE ledgerflow.step_attempt DROP CONSTRAINT step_attempt_status_check;
ALTER TABLE ledgerflow.step_attempt ADD CONSTRAINT step_attempt_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'abandoned', 'suspended'));

ALTER TABLE ledgerflow.workflow_run DROP CONSTRAINT workflow_run_status_check;
ALTER TABLE ledgerflow.workflow_run ADD CONSTRAINT workflow_run_status_check
    CHECK (status IN ('pending', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'needs_reconciliation'));

-- parent_run_id / parent_step / parent_index   a child run: who started it, from which step, for which item
-- deadline_at       the run is cancelled once it is still unfinished at this time
-- waiting_for       what a waiting run waits for (NULL unless waiting)
-- children_open     this run's children not finished yet (kept by the trigger below)
-- children_failed   this run's children that failed or were cancelled (kept by the trigger below)
ALTER TABLE ledgerflow.workflow_run
    ADD COLUMN parent_run_id   uuid REFERENCES ledgerflow.workflow_run (id) ON DELETE SET NULL,
    ADD COLUMN parent_step     text,
    ADD COLUMN parent_index    integer,
    ADD COLUMN deadline_at     timestamptz,
    ADD COLUMN waiting_for     jsonb,
    ADD COLUMN children_open   integer NOT NULL DEFAULT 0 CHECK (children_open >= 0),
    ADD COLUMN children_failed integer NOT NULL DEFAULT 0 CHECK (children_failed >= 0),
    ADD CONSTRAINT workflow_run_waiting_for_check CHECK ((status = 'waiting') = (waiting_for IS NOT NULL)),
    ADD CONSTRAINT workflow_run_child_check
        CHECK ((parent_step IS NULL) = (parent_index IS NULL) AND (parent_run_id IS NULL OR parent_step IS NOT NULL)),
    ADD CONSTRAINT workflow_run_child_unique UNIQUE (parent_run_id, parent_step, parent_index);

-- One index for everything the claim takes by time: pending runs and waiting runs.
DROP INDEX ledgerflow.workflow_run_pending_idx;
CREATE INDEX workflow_run_due_idx ON ledgerflow.workflow_run (run_after) WHERE status IN ('pending', 'waiting');

-- A skipped step: recorded, not run, no ledger row, output NULL (later steps see undefined).
ALTER TABLE ledgerflow.step_result DROP CONSTRAINT step_result_check;
ALTER TABLE ledgerflow.step_result
    ADD COLUMN skipped boolean NOT NULL DEFAULT false,
    ALTER COLUMN output DROP NOT NULL,
    ADD CONSTRAINT step_result_check CHECK (
        (skipped AND output IS NULL AND idempotency_key IS NULL AND effect_status IS NULL)
        OR (NOT skipped AND output IS NOT NULL AND (
            (kind IN ('transactional', 'external') AND idempotency_key IS NOT NULL AND effect_status = 'recorded')
            OR (kind NOT IN ('transactional', 'external') AND idempotency_key IS NULL AND effect_status IS NULL))));

-- What a sleeping or waiting step waits for, fixed when the run first reached it: the wake-up
-- time (sleep) or timeout (waitFor) is computed once, on database time, and never again.
CREATE TABLE ledgerflow.step_wait (
    run_id          uuid        NOT NULL REFERENCES ledgerflow.workflow_run (id) ON DELETE CASCADE,
    step_name       text        NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('sleep', 'event', 'children')),
    until           timestamptz,
    event_name      text,
    correlation_key text,
    created_at      timestamptz NOT NULL DEFAULT statement_timestamp(),
    resolved_at     timestamptz,
    PRIMARY KEY (run_id, step_name),
    CHECK ((kind = 'event') = (event_name IS NOT NULL AND correlation_key IS NOT NULL)),
    CHECK (kind <> 'sleep' OR until IS NOT NULL)
);

CREATE INDEX step_wait_open_event_idx ON ledgerflow.step_wait (event_name, correlation_key) WHERE resolved_at IS NULL AND kind = 'event';

-- Events, written before anything is delivered: a waiting step takes the oldest event of its
-- name and correlation key that no step has taken, in the commit that completes the step.
-- An event is taken at most once (consumed_* are written once, guarded by consumed_at IS NULL).
CREATE TABLE ledgerflow.event (
    id               uuid        PRIMARY KEY,
    name             text        NOT NULL,
    correlation_key  text        NOT NULL,
    payload          jsonb       NOT NULL,
    dedupe_key       text,
    created_at       timestamptz NOT NULL DEFAULT statement_timestamp(),
    consumed_by_run  uuid        REFERENCES ledgerflow.workflow_run (id) ON DELETE SET NULL,
    consumed_by_step text,
    consumed_at      timestamptz,
    UNIQUE (name, dedupe_key),
    CHECK ((consumed_at IS NULL) = (consumed_by_step IS NULL))
);

CREATE INDEX event_unconsumed_idx ON ledgerflow.event (name, correlation_key, created_at) WHERE consumed_at IS NULL;

-- When a run settles (completed, failed, cancelled):
--   * its parent's counters move, and a waiting parent is woken (run_after = now) once all of
--     its open children are done (children_open below waiting_for.wakeBelow) or one failed;
--   * if it failed or was cancelled, its unfinished children are cancelled (and so on down);
--   * if it was cancelled, its running attempt is closed as abandoned.
-- A trigger, so that every way a run settles — a worker's commit, the reconciler, a client's
-- cancel, a deadline, a parent's cascade — does this, in the same transaction.
CREATE FUNCTION ledgerflow.run_settled() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    woke boolean;
BEGIN
    IF NEW.parent_run_id IS NOT NULL THEN
        UPDATE ledgerflow.workflow_run p
           SET children_open = greatest(p.children_open - 1, 0),
               children_failed = p.children_failed + (CASE WHEN NEW.status = 'completed' THEN 0 ELSE 1 END),
               run_after = CASE
                   WHEN p.status = 'waiting'
                    AND (NEW.status <> 'completed'
                         OR p.children_open - 1 < COALESCE((p.waiting_for->>'wakeBelow')::int, 1))
                   THEN statement_timestamp()
                   ELSE p.run_after END,
               updated_at = statement_timestamp()
         WHERE p.id = NEW.parent_run_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
        RETURNING p.status = 'waiting' AND p.run_after = statement_timestamp() INTO woke;
        IF woke THEN
            PERFORM pg_notify('ledgerflow_runs', NEW.parent_run_id::text);
        END IF;
    END IF;
    IF NEW.status IN ('failed', 'cancelled') THEN
        UPDATE ledgerflow.workflow_run c
           SET status = 'cancelled', finished_at = statement_timestamp(), updated_at = statement_timestamp(),
               lease_owner = NULL, lease_expires_at = NULL, waiting_for = NULL, fencing_token = c.fencing_token + 1,
               error = jsonb_build_object('name', 'Cancelled',
                                          'message', format('its parent run %s %s', NEW.id, NEW.status))
         WHERE c.parent_run_id = NEW.id AND c.status NOT IN ('completed', 'failed', 'cancelled');
    END IF;
    IF NEW.status = 'cancelled' THEN
        UPDATE ledgerflow.step_attempt
           SET status = 'abandoned', finished_at = statement_timestamp(),
               error = jsonb_build_object('name', 'Cancelled', 'message', 'the run was cancelled')
         WHERE run_id = NEW.id AND status = 'running';
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER workflow_run_settled
    AFTER UPDATE OF status ON ledgerflow.workflow_run
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('completed', 'failed', 'cancelled'))
    EXECUTE FUNCTION ledgerflow.run_settled();
