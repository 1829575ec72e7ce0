-- ledgerflow core migration 0012: what was recorded stays true.
--
-- Until 0012 the database refused a completed effect step without a recorded ledger row, but any
-- session with the worker's privileges could UPDATE or DELETE that row afterwards. Now triggers
-- hold every role to the design's history rules (DESIGN.md "Immutable records and roles"):
--
--   step_effect     a RECORDED row cannot be updated, at all, by anyone (superusers included), and
--                   is deleted only by the retention path. Rows in other statuses (intent,
--                   released, and any status a later migration adds) move as before.
--   step_result     insert-only: never updated; deleted only by the retention path.
--   step_attempt    a finished attempt (any status but 'running') is never updated; deleted only
--                   by the retention path.
--   run_archive,
--   effect_archive  append-only: never updated; deleted only by the retention path
--                   (`prune --archive-older-than`).
--   workflow_run    deleted only by the retention path (checked once per statement): deleting a
--                   run cascades to its history, and a cascade runs as the tables' owner, so the
--                   role that asked is judged here, where it is still the current user.
--   TRUNCATE of any of them: the retention path only.
--
-- One exception to "never updated": a transactional step whose handler wrote through ctx.tx
-- inserts its ledger row `recorded` when its transaction opens (so a concurrent attempt with the
-- same key waits on it) and fills in the output at commit, in that same transaction
-- (`fill-recorded`). A row version written by the current transaction has been seen by nobody
-- else, so `OLD.xmin = pg_current_xact_id()::xid` lets that one update through. Every other
-- update of a recorded row is refused — including a no-op one, which would otherwise give the
-- row a fresh xmin and open the exception to the rest of its transaction.
--
-- Cost on the hot path: the UPDATE trigger's WHEN clause is evaluated by the server without
-- entering PL/pgSQL, and `OLD.status = 'recorded'` is false for every legitimate transition
-- (intent -> recorded, intent -> released, released -> intent), so ledger writes pay one
-- comparison per row. Deletes of recorded rows (pruning) pay a role check per row.
--
-- The retention path proves itself by role, not by anything a session can set: a session may
-- delete recorded history when its login role (session_user) is a member of a role listed in
-- ledgerflow.retention_role, and so is the role the statement runs as (current_user) — or that
-- role owns the table, because PostgreSQL runs the ON DELETE CASCADE of a pruned run as the
-- owner of the child table. Checking both means neither a worker whose DELETE on workflow_run
-- cascades (session_user is the worker) nor a retention login that did SET ROLE to another role
-- (current_user; for a cascade, the statement trigger on workflow_run judges it) gets through.
-- This migration lists the role that runs it — the schema's owner — so that a deployment with one
-- role keeps pruning; `ledgerflow grants --retention <role>` adds others, and only the owner can
-- write the list. A superuser is a member of every role.
--
-- Refusals raise SQLSTATE LF001 with a message naming the table, the row and the rule.

CREATE TABLE ledgerflow.retention_role (
    role_name  text        PRIMARY KEY,
    added_at   timestamptz NOT NULL DEFAULT statement_timestamp()
);

INSERT INTO ledgerflow.retention_role (role_name) VALUES (current_user);

-- The refusal. Arguments: the rule (e.g. 'recorded ledger rows are immutable'), then the columns
-- that name a row. A DELETE or TRUNCATE by the retention path is let through.
CREATE FUNCTION ledgerflow.refuse_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_row jsonb;
    names   text := '';
    i       integer;
BEGIN
    IF TG_OP IN ('DELETE', 'TRUNCATE')
       -- Inline rather than in a helper function: pruning runs this once per deleted row.
       -- to_regrole is NULL for a listed role that was dropped since (pg_has_role then NULL).
       AND EXISTS (SELECT 1 FROM ledgerflow.retention_role r
                    WHERE pg_catalog.pg_has_role(session_user, pg_catalog.to_regrole(pg_catalog.quote_ident(r.role_name)), 'MEMBER'))
       AND (EXISTS (SELECT 1 FROM ledgerflow.retention_role r
                     WHERE pg_catalog.pg_has_role(current_user, pg_catalog.to_regrole(pg_catalog.quote_ident(r.role_name)), 'MEMBER'))
            OR pg_catalog.pg_has_role(current_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID), 'MEMBER'))
    THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD END;
    END IF;
    IF TG_LEVEL = 'ROW' THEN
        old_row := to_jsonb(OLD);
        FOR i IN 1 .. TG_NARGS - 1 LOOP
            names := names || CASE WHEN i > 1 THEN ', ' ELSE '' END || TG_ARGV[i] || ' ' || COALESCE(old_row ->> TG_ARGV[i], 'NULL');
        END LOOP;
        names := ' (' || names || ')';
    END IF;
    RAISE EXCEPTION 'ledgerflow: %: % cannot be %; only the retention role may delete it (ledgerflow prune, as a role listed in ledgerflow.retention_role)',
        TG_ARGV[0], TG_TABLE_NAME || names,
        CASE TG_OP WHEN 'UPDATE' THEN 'updated' WHEN 'DELETE' THEN 'deleted' ELSE 'truncated' END
        USING ERRCODE = 'LF001', SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME,
              HINT = 'Recorded history is kept as it happened; see DESIGN.md "Immutable records and roles".';
END
$$;

CREATE TRIGGER step_effect_recorded_update
    BEFORE UPDATE ON ledgerflow.step_effect
    FOR EACH ROW
    WHEN (OLD.status = 'recorded' AND OLD.xmin <> pg_catalog.pg_current_xact_id()::xid)
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('recorded ledger rows are immutable', 'workflow_id', 'step_name', 'idempotency_key');
CREATE TRIGGER step_effect_recorded_delete
    BEFORE DELETE ON ledgerflow.step_effect
    FOR EACH ROW
    WHEN (OLD.status = 'recorded')
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('recorded ledger rows are immutable', 'workflow_id', 'step_name', 'idempotency_key');
CREATE TRIGGER step_effect_truncate
    BEFORE TRUNCATE ON ledgerflow.step_effect
    FOR EACH STATEMENT
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('recorded ledger rows are immutable');

CREATE TRIGGER step_result_update
    BEFORE UPDATE ON ledgerflow.step_result
    FOR EACH ROW
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('step results are insert-only', 'run_id', 'step_name');
CREATE TRIGGER step_result_delete
    BEFORE DELETE ON ledgerflow.step_result
    FOR EACH ROW
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('step results are insert-only', 'run_id', 'step_name');
CREATE TRIGGER step_result_truncate
    BEFORE TRUNCATE ON ledgerflow.step_result
    FOR EACH STATEMENT
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('step results are insert-only');

CREATE TRIGGER step_attempt_finished_update
    BEFORE UPDATE ON ledgerflow.step_attempt
    FOR EACH ROW
    WHEN (OLD.status <> 'running')
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('finished attempts are immutable', 'run_id', 'step_name', 'attempt', 'status');
CREATE TRIGGER step_attempt_finished_delete
    BEFORE DELETE ON ledgerflow.step_attempt
    FOR EACH ROW
    WHEN (OLD.status <> 'running')
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('finished attempts are immutable', 'run_id', 'step_name', 'attempt', 'status');
CREATE TRIGGER step_attempt_truncate
    BEFORE TRUNCATE ON ledgerflow.step_attempt
    FOR EACH STATEMENT
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('finished attempts are immutable');

CREATE TRIGGER run_archive_update
    BEFORE UPDATE ON ledgerflow.run_archive
    FOR EACH ROW
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('the run archive is append-only', 'id', 'workflow_name', 'dedupe_key');
CREATE TRIGGER run_archive_delete
    BEFORE DELETE ON ledgerflow.run_archive
    FOR EACH ROW
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('the run archive is append-only', 'id', 'workflow_name', 'dedupe_key');
CREATE TRIGGER run_archive_truncate
    BEFORE TRUNCATE ON ledgerflow.run_archive
    FOR EACH STATEMENT
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('the run archive is append-only');

CREATE TRIGGER effect_archive_update
    BEFORE UPDATE ON ledgerflow.effect_archive
    FOR EACH ROW
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('the effect archive is append-only', 'run_id', 'step_name', 'idempotency_key');
CREATE TRIGGER effect_archive_delete
    BEFORE DELETE ON ledgerflow.effect_archive
    FOR EACH ROW
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('the effect archive is append-only', 'run_id', 'step_name', 'idempotency_key');
CREATE TRIGGER effect_archive_truncate
    BEFORE TRUNCATE ON ledgerflow.effect_archive
    FOR EACH STATEMENT
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('the effect archive is append-only');

CREATE TRIGGER workflow_run_delete
    BEFORE DELETE ON ledgerflow.workflow_run
    FOR EACH STATEMENT
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('runs are deleted only by pruning, with their recorded history');
CREATE TRIGGER workflow_run_truncate
    BEFORE TRUNCATE ON ledgerflow.workflow_run
    FOR EACH STATEMENT
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('runs are deleted only by pruning, with their recorded history');
