-- suspendRunStatement: running -> waiting for an event until its timeout or deadline
--
-- $1 = "{\"kind\":\"event\",\"step\":\"settled\",\"event\":\"payment.settled\",\"key\":\"order-42\",\"until\":\"2030-01-02T03:04:05.000Z\"}"
-- $2 = "2030-01-02T03:04:05.000Z"
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = 7
-- $5 = "{\"name\":\"Suspended\",\"message\":\"waiting for event payment.settled with key order-42 until 2030-01-02T03:04:05.000Z\"}"
-- $6 = "00000000-0000-4000-8000-000000000001"
-- $7 = "settled"
-- $8 = 1
-- $9 = "ledgerflow_runs"

    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET status = 'waiting', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
             waiting_for = $1::jsonb,
             run_after = CASE WHEN false THEN statement_timestamp() ELSE LEAST(COALESCE($2::timestamptz, 'infinity'), COALESCE(deadline_at, 'infinity')) END
       WHERE id = $3 AND fencing_token = $4 AND status = 'running'
      RETURNING id, run_after <= statement_timestamp() AS due
    ),
    attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'suspended', finished_at = statement_timestamp(),
             error = $5::jsonb
       WHERE run_id = $6 AND step_name = $7 AND attempt = $8 AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, (SELECT due FROM fenced) AS due,
           (SELECT pg_notify($9, id::text) FROM fenced WHERE due) AS notified;
