-- ledgerflow core migration 0020: what each workflow version's definition was when it first ran
-- (its fingerprint), and draft versions.
--
-- A version's `definition_hash` covers its shape only (steps, kinds, keys' presence, ...), not its
-- schemas: an output field added without a version bump passed every check and failed every
-- attempt after the effect happened. The runtime cannot recompute codegen's source pins, but it can
-- fingerprint a loaded definition: the shape plus the canonical JSON Schema of every zod schema,
-- hashed per part (runtime/worker/workflow-fingerprint.ts). The first worker that serves a version
-- registers its fingerprint here (first registration wins); every worker compares its own at start
-- and refuses to start, naming the parts, when they differ.
--
-- A draft version (its migration was generated before `ledgerflow codegen --release`) records the
-- name of that migration in workflow_version.draft_migration: `ledgerflow migrate` replaces the
-- version's rows when the draft's migration changed, and a worker re-registers a draft's changed
-- fingerprint — both only while the version has no runs (workflow_run or run_archive). A released
-- version's registration never changes; nor does a draft's once it has runs (the trigger below).

ALTER TABLE ledgerflow.workflow_version ADD COLUMN draft_migration text;

CREATE TABLE ledgerflow.workflow_fingerprint (
    workflow_name text        NOT NULL,
    version       integer     NOT NULL,
    fingerprint   text        NOT NULL,
    parts         jsonb       NOT NULL,
    registered_by text        NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_name, version),
    FOREIGN KEY (workflow_name, version) REFERENCES ledgerflow.workflow_version (workflow_name, version) ON DELETE CASCADE
);

-- A registration changes only for a draft without runs; anything else is refused for every role.
CREATE FUNCTION ledgerflow.workflow_fingerprint_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM ledgerflow.workflow_version v
         WHERE v.workflow_name = OLD.workflow_name AND v.version = OLD.version AND v.draft_migration IS NOT NULL
    ) OR EXISTS (
        SELECT 1 FROM ledgerflow.workflow_run r WHERE r.workflow_name = OLD.workflow_name AND r.workflow_version = OLD.version
    ) OR EXISTS (
        SELECT 1 FROM ledgerflow.run_archive a WHERE a.workflow_name = OLD.workflow_name AND a.workflow_version = OLD.version
    ) THEN
        RAISE EXCEPTION 'ledgerflow: workflow_fingerprint: the registered definition of workflow "%" v% cannot change: the version is released or has runs; bump its version',
            OLD.workflow_name, OLD.version
            USING ERRCODE = 'LF001', SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER workflow_fingerprint_guard BEFORE UPDATE ON ledgerflow.workflow_fingerprint
    FOR EACH ROW EXECUTE FUNCTION ledgerflow.workflow_fingerprint_guard();
