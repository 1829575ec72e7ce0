-- ledgerflow core migration 0017: a run that is compensating is never cancelled — not by its
-- parent's cascade, a deadline or an operator.
--
-- The cascade of run_settled (0013) cancelled every unfinished child of a run that failed, was
-- cancelled or compensated, or failed to compensate — also a child that had failed and was
-- running its compensations (`compensation` set, status pending, running, waiting or
-- needs_reconciliation). Its fencing token moved on, the commit of its compensation was refused,
-- and it ended `cancelled` with `compensation` set: an effect recorded and never undone, in a
-- state the run machine does not have. The client's cancel and the worker's deadline commit
-- already left a compensating run alone; the cascade now does too, so such a child finishes its
-- compensations and ends `compensated` or `compensation_failed` after its parent is over.
--
-- The database now refuses the state itself: `cancelled` implies `compensation IS NULL`.
-- A database the old cascade reached may hold such runs. They are repaired first, to what they
-- are: a compensation that did not finish, `compensation_failed` — final, listed for an operator,
-- whose retry resumes the compensation it was at (`current_step`, left as it was) with a fresh
-- budget. The repair settles nothing new: the run is already final, so the triggers find its
-- parent final (0013's cascade followed its parent's settling; a retry of that parent is refused
-- while this child is cancelled), its slots given back and its unfinished children cancelled.

-- run_settled (0013) with one change: the cascade skips a child that is compensating.
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
        -- A child that is compensating goes on undoing its effects: cancelling it would fence its
        -- compensation out with an effect recorded and never undone.
        UPDATE ledgerflow.workflow_run c
           SET status = 'cancelled', finished_at = statement_timestamp(), updated_at = statement_timestamp(),
               lease_owner = NULL, lease_expires_at = NULL, waiting_for = NULL, fencing_token = c.fencing_token + 1,
               error = jsonb_build_object('name', 'Cancelled',
                                          'message', format('its parent run %s %s', NEW.id, NEW.status))
         WHERE c.parent_run_id = NEW.id
           AND c.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
           AND c.compensation IS NULL;
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

-- The runs the old cascade cancelled mid-compensation: their compensation did not finish.
UPDATE ledgerflow.workflow_run
   SET status = 'compensation_failed', updated_at = statement_timestamp(),
       error = jsonb_build_object(
           'name', 'CompensationInterrupted',
           'message', format('the run was cancelled while compensating (%s): its compensation did not finish; '
                             'retry the run to finish it (core 0017)', COALESCE(error->>'message', 'no reason given')))
 WHERE status = 'cancelled' AND compensation IS NOT NULL;

ALTER TABLE ledgerflow.workflow_run ADD CONSTRAINT workflow_run_cancelled_compensation_check
    CHECK (status <> 'cancelled' OR compensation IS NULL);
