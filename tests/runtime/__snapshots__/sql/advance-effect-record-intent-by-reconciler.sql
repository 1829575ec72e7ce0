-- advanceRunStatement: the reconciler records a found intent (no attempt of its own) and releases the run
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = 8
-- $3 = 2
-- $4 = "order-payment"
-- $5 = 1
-- $6 = "charge"
-- $7 = "external"
-- $8 = "{\"ok\":true}"
-- $9 = 1
-- $10 = "order-42-charge"
-- $11 = "recorded"
-- $12 = "{\"ok\":true}"
-- $13 = "found by the reconciler"
-- $14 = "00000000-0000-4000-8000-000000000001"
-- $15 = "charge"
-- $16 = "order-42-charge"
-- $17 = 1

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
    , effect AS (
          UPDATE ledgerflow.step_effect
             SET status = 'recorded', effect = $12::jsonb, recorded_at = COALESCE(recorded_at, statement_timestamp()),
                 resolution = COALESCE($13::text, resolution)
           WHERE workflow_id = $14 AND step_name = $15 AND idempotency_key = $16
             AND status = 'intent' AND attempt = $17
             AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1)   
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           NULL::int AS next_attempt,
           NULL::jsonb AS claimed,
           false AS effect_exists;
