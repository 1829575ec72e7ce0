-- suspendRunStatement: running -> waiting for children, due at once if they settled meanwhile
--
-- $1 = "{\"kind\":\"children\",\"step\":\"copy\",\"open\":3,\"total\":10,\"wakeBelow\":4}"
-- $2 = 4
-- $3 = null
-- $4 = "00000000-0000-4000-8000-000000000001"
-- $5 = 7
-- $6 = "{\"name\":\"Suspended\",\"message\":\"waiting for 3 of 10 children\"}"
-- $7 = "00000000-0000-4000-8000-000000000001"
-- $8 = "copy"
-- $9 = 1
-- $10 = "ledgerflow_runs"

    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET status = 'waiting', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
             waiting_for = jsonb_set($1::jsonb, '{open}', to_jsonb(children_open)),
             run_after = CASE WHEN (children_open < $2 OR children_failed > 0) THEN statement_timestamp() ELSE LEAST(COALESCE($3::timestamptz, 'infinity'), COALESCE(deadline_at, 'infinity')) END
       WHERE id = $4 AND fencing_token = $5 AND status = 'running'
      RETURNING id, run_after <= statement_timestamp() AS due
    ),
    attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'suspended', finished_at = statement_timestamp(),
             error = $6::jsonb
       WHERE run_id = $7 AND step_name = $8 AND attempt = $9 AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, (SELECT due FROM fenced) AS due,
           (SELECT pg_notify($10, id::text) FROM fenced WHERE due) AS notified;
