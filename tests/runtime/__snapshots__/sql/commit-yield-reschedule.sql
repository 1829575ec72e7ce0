-- commitYieldStatement: reschedule the run to an open intent's horizon
--
-- $1 = "2030-01-02T03:04:05.000Z"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = "{\"name\":\"AwaitingIntent\",\"message\":\"attempt 1 left an intent whose outcome is unknown\"}"
-- $5 = "2030-01-02T03:04:05.000Z"
-- $6 = "00000000-0000-4000-8000-000000000001"
-- $7 = "charge"
-- $8 = 2

    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(), status = 'pending', run_after = $1::timestamptz
       WHERE id = $2 AND fencing_token = $3 AND status = 'running'
      RETURNING id
    ),
    attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = statement_timestamp(), error = $4::jsonb,
             next_eligible_at = $5::timestamptz
       WHERE run_id = $6 AND step_name = $7 AND attempt = $8 AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced;
