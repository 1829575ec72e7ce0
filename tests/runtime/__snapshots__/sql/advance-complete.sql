-- advanceRunStatement: last step committed, run completed (no fused claim)
--
-- $1 = "{\"notify\":{\"ok\":true}}"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = 3
-- $5 = "order-payment"
-- $6 = 1
-- $7 = "notify"
-- $8 = "step"
-- $9 = "{\"ok\":true}"
-- $10 = 2
-- $11 = null
-- $12 = null
-- $13 = "00000000-0000-4000-8000-000000000001"
-- $14 = "notify"
-- $15 = 2

/* ledgerflow:prepared */ 
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = current_step + 1, updated_at = statement_timestamp(), error = NULL, status = 'completed', lease_owner = NULL, lease_expires_at = NULL, finished_at = statement_timestamp(),
              output = $1::jsonb
       WHERE id = $2 AND fencing_token = $3 AND status = 'running'
         AND current_step = $4 
      RETURNING id
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
      SELECT id, $5, $6, $7, $8, $9::jsonb,
             $10, $11::text, $12::text
        FROM fenced
      RETURNING 1
    )
     , finished AS (
          UPDATE ledgerflow.step_attempt SET status = 'succeeded', finished_at = statement_timestamp()
           WHERE run_id = $13 AND step_name = $14 AND attempt = $15 AND status = 'running'
             AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1)  
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           NULL::int AS next_attempt,
           NULL::jsonb AS claimed,
           false AS effect_exists;
