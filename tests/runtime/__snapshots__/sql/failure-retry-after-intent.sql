-- failureRetryStatement: attempt failed with its intent open, run pending no earlier than the intent's horizon
--
-- $1 = "{\"name\":\"Error\",\"message\":\"card processor unavailable\",\"step\":\"charge\",\"attempt\":2}"
-- $2 = 2000
-- $3 = "2030-01-02T03:04:05.000Z"
-- $4 = "00000000-0000-4000-8000-000000000001"
-- $5 = "charge"
-- $6 = 2
-- $7 = 2000
-- $8 = "2030-01-02T03:04:05.000Z"
-- $9 = "00000000-0000-4000-8000-000000000001"

        WITH attempt AS (
          UPDATE ledgerflow.step_attempt
             SET status = 'failed', error = $1::jsonb, finished_at = statement_timestamp(),
                 next_eligible_at = GREATEST(statement_timestamp() + ($2::double precision * interval '1 millisecond'), $3::timestamptz)
           WHERE run_id = $4 AND step_name = $5 AND attempt = $6 AND status = 'running'
          RETURNING next_eligible_at
        )
        UPDATE ledgerflow.workflow_run
           SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
               run_after = GREATEST(statement_timestamp() + ($7::double precision * interval '1 millisecond'), $8::timestamptz)
         WHERE id = $9
        RETURNING run_after AS retry_at;
