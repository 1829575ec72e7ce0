-- resolveWaitStatement: the wait is over; senders stop waking the run for it
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "settled"
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = 7

    UPDATE ledgerflow.step_wait SET resolved_at = statement_timestamp()
     WHERE run_id = $1 AND step_name = $2 AND resolved_at IS NULL AND EXISTS (SELECT 1 FROM ledgerflow.workflow_run r
               WHERE r.id = $3 AND r.fencing_token = $4 AND r.status = 'running');
