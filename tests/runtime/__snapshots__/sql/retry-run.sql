-- retryRunStatement: a failed, cancelled or compensation_failed run pending again at its step, with a fresh attempt budget
--
-- $1 = "charge"
-- $2 = "charge"
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = "ledgerflow_runs"

    WITH retried AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'pending', run_after = statement_timestamp(), updated_at = statement_timestamp(),
             finished_at = NULL, error = NULL, output = NULL, waiting_for = NULL, lease_owner = NULL, lease_expires_at = NULL,
             fencing_token = ledgerflow.next_fencing_token(r.fencing_token),
             deadline_at = CASE WHEN r.deadline_at <= statement_timestamp() THEN NULL ELSE r.deadline_at END,
             budget_step = $1,
             budget_base = (SELECT COALESCE(max(a.attempt), 0) FROM ledgerflow.step_attempt a
                             WHERE a.run_id = r.id AND a.step_name = $2),
             children_open = (SELECT count(*) FROM ledgerflow.workflow_run c
                               WHERE c.parent_run_id = r.id AND c.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')),
             children_failed = (SELECT count(*) FROM ledgerflow.workflow_run c
                                 WHERE c.parent_run_id = r.id AND c.status IN ('cancelled', 'failed', 'compensated', 'compensation_failed'))
       WHERE r.id = $3 AND r.status IN ('failed', 'cancelled', 'compensation_failed')
      RETURNING r.id, r.deadline_at
    )
    SELECT deadline_at, pg_notify($4, id::text) AS notified FROM retried;
