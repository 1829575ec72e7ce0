-- failureRetryStatement: attempt failed, run pending after a 2 s backoff
--
-- $1 = "{\"name\":\"Error\",\"message\":\"card processor unavailable\",\"step\":\"reserve\",\"attempt\":2}"
-- $2 = 2000
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = "reserve"
-- $5 = 2
-- $6 = 2000
-- $7 = "00000000-0000-4000-8000-000000000001"

        WITH attempt AS (
          UPDATE ledgerflow.step_attempt
             SET status = 'failed', error = $1::jsonb, finished_at = statement_timestamp(),
                 next_eligible_at = statement_timestamp() + ($2::double precision * interval '1 millisecond')
           WHERE run_id = $3 AND step_name = $4 AND attempt = $5 AND status = 'running'
          RETURNING next_eligible_at
        )
        UPDATE ledgerflow.workflow_run
           SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
               run_after = statement_timestamp() + ($6::double precision * interval '1 millisecond')
         WHERE id = $7
        RETURNING run_after AS retry_at;
