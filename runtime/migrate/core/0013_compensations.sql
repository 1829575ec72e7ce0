-- ledgerflow core migration 0013: compensations — undoing the recorded effects of a run that
-- failed or was cancelled.
--
-- A step may declare a compensation (`compensate: { name, key, ... }`): an effect of the same kind
-- with its own key and handler. Codegen emits it as one more `workflow_step_def` row, after the
-- workflow's steps, in the order compensations run (the last declared first), with `compensates`
-- naming the step it undoes. Its attempts, ledger row and result are those of any step, so the
-- claim (by position), the intent/result/reconcile protocol and the foreign keys of step_result
-- and step_effect hold for it unchanged.
--
-- A run being compensated is not a status of its own: it goes through pending and running like
-- any run (one claim path, the same fencing, retries, stop and crash take-over), positioned at a
-- compensation, with `compensation` saying why ('failure': attempts exhausted, a non-retryable
-- error or the deadline; 'cancel': `cancel(runId, { compensate: true })`). The CLI and dashboard
-- show such a run as compensating. It ends in one of two new final statuses:
--   compensated          every compensation whose step's effect was recorded ran (exactly once)
--   compensation_failed  a compensation failed for good: parked for an operator (`retry`)
-- The run's `error` keeps the failure that started it (or the cancel).
--
-- Both are final like completed/failed/cancelled for the triggers of 0003 (the parent's counters,
-- counted as a failed child; unfinished children cancelled), 0004 (queue slots given back) and
-- 0011 (a waiter is notified). A run that is still compensating is not final, so retention never
-- prunes it; compensated and compensation_failed runs are pruned like other finished runs once
-- core 0015 lets the archive keep them.

ALTER TABLE ledgerflow.workflow_step_def ADD COLUMN compensates text;
ALTER TABLE ledgerflow.workflow_step_def
    ADD CONSTRAINT workflow_step_def_compensates_check
        CHECK (compensates IS NULL OR (kind IN ('transactional', 'external') AND compensates <> step_name));

-- `workflow(name, { compensateOnCancel: true })`: a cancel that does not say compensates. Emitted
-- by codegen (an UPDATE after the version's insert) only when true.
ALTER TABLE ledgerflow.workflow_version ADD COLUMN compensate_on_cancel boolean NOT NULL DEFAULT false;

ALTER TABLE ledgerflow.workflow_run
    ADD COLUMN compensation text CHECK (compensation IN ('failure', 'cancel'));

ALTER TABLE ledgerflow.workflow_run DROP CONSTRAINT workflow_run_status_check;
ALTER TABLE ledgerflow.workflow_run ADD CONSTRAINT workflow_run_status_check
    CHECK (status IN ('pending', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'needs_reconciliation',
                      'compensated', 'compensation_failed'));

-- The finished_at check of 0001 is unnamed: found by its definition.
DO $$
DECLARE
    name text;
BEGIN
    SELECT conname INTO name FROM pg_constraint
     WHERE conrelid = 'ledgerflow.workflow_run'::regclass AND contype = 'c'
       AND pg_get_constraintdef(oid) LIKE '%finished_at IS NOT NULL%';
    EXECUTE format('ALTER TABLE ledgerflow.workflow_run DROP CONSTRAINT %I', name);
END
$$;
ALTER TABLE ledgerflow.workflow_run ADD CONSTRAINT workflow_run_finished_check
    CHECK ((status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')) = (finished_at IS NOT NULL));
-- Only a run being compensated (or done with it) says why.
ALTER TABLE ledgerflow.workflow_run ADD CONSTRAINT workflow_run_compensation_final_check
    CHECK (compensation IS NOT NULL OR status NOT IN ('compensated', 'compensation_failed'));

-- run_settled (0003) with the two new final statuses: counted as failed by the parent, and
-- cascading to unfinished children like failed.
CREATE OR REPLACE FUNCTION ledgerflow.run_settled() RETURNS trigger LANGUAGE plpgsql AS $$
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
         WHERE p.id = NEW.parent_run_id
           AND p.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
        RETURNING p.status = 'waiting' AND p.run_after = statement_timestamp() INTO woke;
        IF woke THEN
            PERFORM pg_notify('ledgerflow_runs', NEW.parent_run_id::text);
        END IF;
    END IF;
    IF NEW.status IN ('failed', 'cancelled', 'compensated', 'compensation_failed') THEN
        UPDATE ledgerflow.workflow_run c
           SET status = 'cancelled', finished_at = statement_timestamp(), updated_at = statement_timestamp(),
               lease_owner = NULL, lease_expires_at = NULL, waiting_for = NULL, fencing_token = c.fencing_token + 1,
               error = jsonb_build_object('name', 'Cancelled',
                                          'message', format('its parent run %s %s', NEW.id, NEW.status))
         WHERE c.parent_run_id = NEW.id
           AND c.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed');
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

DROP TRIGGER workflow_run_settled ON ledgerflow.workflow_run;
CREATE TRIGGER workflow_run_settled
    AFTER UPDATE OF status ON ledgerflow.workflow_run
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          AND NEW.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed'))
    EXECUTE FUNCTION ledgerflow.run_settled();

DROP TRIGGER workflow_run_settled_queues ON ledgerflow.workflow_run;
CREATE TRIGGER workflow_run_settled_queues
    AFTER UPDATE OF status ON ledgerflow.workflow_run
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          AND NEW.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed'))
    EXECUTE FUNCTION ledgerflow.run_settled_queues();

DROP TRIGGER workflow_run_settled_notify ON ledgerflow.workflow_run;
CREATE TRIGGER workflow_run_settled_notify
    AFTER UPDATE OF status ON ledgerflow.workflow_run
    FOR EACH ROW
    WHEN (NEW.notify_settled AND OLD.status IS DISTINCT FROM NEW.status
          AND NEW.status IN ('completed', 'failed', 'cancelled', 'needs_reconciliation', 'compensated', 'compensation_failed'))
    EXECUTE FUNCTION ledgerflow.run_settled_notify();
