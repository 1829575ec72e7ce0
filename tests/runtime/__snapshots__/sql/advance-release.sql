-- advanceRunStatement: plain step committed, run released as pending (worker stopping)
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = 7
-- $3 = 0
-- $4 = "order-payment"
-- $5 = 1
-- $6 = "reserve"
-- $7 = "step"
-- $8 = "{\"ok\":true}"
-- $9 = 2
-- $10 = null
-- $11 = null
-- $12 = "00000000-0000-4000-8000-000000000001"
-- $13 = "reserve"
-- $14 = 2

/* ledgerflow:prepared */ 
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = current_step + 1, updated_at = statement_timestamp(), error = NULL, status = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = statement_timestamp()
       WHERE id = $1 AND fencing_token = $2 AND status = 'running'
         AND current_step = $3 
      RETURNING id
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
      SELECT id, $4, $5, $6, $7, $8::jsonb,
             $9, $10::text, $11::text
        FROM fenced
      RETURNING 1
    )
     , finished AS (
          UPDATE ledgerflow.step_attempt SET status = 'succeeded', finished_at = statement_timestamp()
           WHERE run_id = $12 AND step_name = $13 AND attempt = $14 AND status = 'running'
             AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1)  
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           NULL::int AS next_attempt,
           NULL::jsonb AS claimed,
           false AS effect_exists;
