-- ledgerflow core migration 0008: retention — finished runs can be pruned, their identity stays.
--
-- Pruning (`ledgerflow prune`, runtime/retention/prune.ts) deletes finished runs with their state,
-- attempts, waits and ledger rows, in bounded batches. What protects an effect from happening twice
-- is not only the ledger (per run, deleted with it) but the run's IDENTITY: its id and its
-- (workflow_name, dedupe_key). Were they forgotten, a start redelivered after the prune would
-- create a NEW run, whose ledger is empty, and a provider that does not dedupe would be charged
-- again. So a pruned run leaves a tombstone here, written in the same statement that deletes it:
--
-- run_archive      one row per pruned run: id, workflow, dedupe key, a hash of its input (a
--                  redelivered start with another input is refused as before), final status and
--                  times. No input, output or error: those are what retention is meant to drop.
-- effect_archive   the run's RECORDED ledger rows (step, key, kind, effect, request hash,
--                  resolution, recorded_at): which effects happened under which key, for an
--                  operator or a provider's reconciliation asking later.
--
-- A start with the id or dedupe key of an archived run creates nothing and returns the archived
-- run (ledgerflow.pruned_run below). The archive is kept until `prune --archive-older-than` deletes
-- it (default: forever); it must outlive every redelivery of a start and every reconciliation a
-- provider may ask about (README "Retention").
--
-- Never pruned: a run that is not completed/failed/cancelled; a run with an open intent (a failed
-- or cancelled run may keep one until the reconciler or an operator settles it); a run that still
-- has children (children go first); a child whose parent is not finished (the parent reads its
-- children's outputs). A finished run holds no queue slot or place in line (run_settled_queues,
-- core 0004), and no open debounce window (only pending runs have one).

CREATE TABLE ledgerflow.run_archive (
    id               uuid        PRIMARY KEY,
    workflow_name    text        NOT NULL,
    workflow_version integer     NOT NULL,
    dedupe_key       text,
    -- sha256 (hex) of the input's jsonb text: jsonb prints its keys in one order, so equal inputs hash equally.
    input_hash       text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('completed', 'failed', 'cancelled')),
    parent_run_id    uuid,
    created_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL,
    pruned_at        timestamptz NOT NULL DEFAULT statement_timestamp(),
    UNIQUE (workflow_name, dedupe_key)
);

-- `prune --archive-older-than`: the oldest tombstones first.
CREATE INDEX run_archive_finished_idx ON ledgerflow.run_archive (finished_at, id);

CREATE TABLE ledgerflow.effect_archive (
    run_id          uuid        NOT NULL REFERENCES ledgerflow.run_archive (id) ON DELETE CASCADE,
    step_name       text        NOT NULL,
    idempotency_key text        NOT NULL,
    kind            text        NOT NULL,
    effect          jsonb       NOT NULL,
    request_hash    text        NOT NULL,
    resolution      text,
    recorded_at     timestamptz NOT NULL,
    PRIMARY KEY (run_id, step_name, idempotency_key)
);

-- A prune batch takes the oldest finished runs by this index (and stops at the cut-off).
CREATE INDEX workflow_run_finished_idx ON ledgerflow.workflow_run (finished_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- Deleting a run sets event.consumed_by_run to NULL (core 0003); without an index every deleted
-- run would scan the whole event table. The event itself stays consumed (consumed_at) and keeps
-- its own dedupe key.
CREATE INDEX event_consumed_by_run_idx ON ledgerflow.event (consumed_by_run) WHERE consumed_by_run IS NOT NULL;

-- The archived run a start with this id or (workflow, dedupe key) must return instead of creating
-- one; NULL when there is none. Called by a start that names its run (an explicit id or a dedupe
-- key) before it inserts, so race-free with a prune of that very run:
--   1. FOR KEY SHARE on the live run, if there is one: a prune holding it (FOR UPDATE, then DELETE)
--      is waited for; a prune that comes later skips it (SKIP LOCKED) until this start's
--      transaction ends.
--   2. Then the archive is read with a NEW snapshot (a volatile PL/pgSQL function takes one per
--      statement in READ COMMITTED), so a prune committed while step 1 waited is seen.
-- Either the live run is still there (and the start's INSERT … ON CONFLICT finds it), or its
-- tombstone is visible here: never neither.
CREATE FUNCTION ledgerflow.pruned_run(run uuid, wf text, key text) RETURNS uuid
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    archived uuid;
BEGIN
    -- Each lookup on its own index (an OR of the two made PL/pgSQL's cached generic plan scan the
    -- whole table, once per start and once per child inserted).
    PERFORM 1 FROM ledgerflow.workflow_run r WHERE r.id = run FOR KEY SHARE;
    IF key IS NOT NULL THEN
        PERFORM 1 FROM ledgerflow.workflow_run r WHERE r.workflow_name = wf AND r.dedupe_key = key FOR KEY SHARE;
    END IF;
    SELECT a.id INTO archived FROM ledgerflow.run_archive a WHERE a.id = run;
    IF archived IS NULL AND key IS NOT NULL THEN
        SELECT a.id INTO archived FROM ledgerflow.run_archive a WHERE a.workflow_name = wf AND a.dedupe_key = key;
    END IF;
    RETURN archived;
END
$$;

-- A child/forEach step's key that names an archived run of the child workflow is the same conflict
-- as one that names a live run it did not start (the step fails with ConflictError): children of
-- a finished parent are never started again, so any such key belongs to another parent.
CREATE FUNCTION ledgerflow.child_key_archived() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF ledgerflow.pruned_run(NEW.id, NEW.workflow_name, NEW.dedupe_key) IS NOT NULL THEN
        RAISE EXCEPTION 'the key "%" of workflow "%" names a pruned run', NEW.dedupe_key, NEW.workflow_name
            USING ERRCODE = 'unique_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER workflow_run_child_key_archived
    BEFORE INSERT ON ledgerflow.workflow_run
    FOR EACH ROW
    WHEN (NEW.parent_run_id IS NOT NULL AND NEW.dedupe_key IS NOT NULL)
    EXECUTE FUNCTION ledgerflow.child_key_archived();
