-- attemptCommitStateStatement: after a commit whose outcome is unknown, did it happen?
--
-- $1 = "charge"
-- $2 = 2
-- $3 = "00000000-0000-4000-8000-000000000001"

    SELECT r.fencing_token, a.status AS attempt_status
      FROM ledgerflow.workflow_run r
      LEFT JOIN ledgerflow.step_attempt a ON a.run_id = r.id AND a.step_name = $1 AND a.attempt = $2
     WHERE r.id = $3;
