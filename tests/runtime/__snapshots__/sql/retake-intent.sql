-- retakeIntentStatement: reconcile said not_found; attempt 2 takes attempt 1's intent over
--
-- $1 = 30000
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = 2
-- $5 = 7
-- $6 = 60000
-- $7 = "not_found by reconcile in attempt 2; performing again with the same key"
-- $8 = "00000000-0000-4000-8000-000000000001"
-- $9 = "charge"
-- $10 = "order-42-charge"
-- $11 = 1

    WITH fenced AS (
      UPDATE ledgerflow.workflow_run SET lease_expires_at = statement_timestamp() + ($1::double precision * interval '1 millisecond'), updated_at = statement_timestamp()
       WHERE id = $2 AND fencing_token = $3 AND status = 'running'
      RETURNING id
    ),
    retaken AS (
      UPDATE ledgerflow.step_effect
         SET attempt = $4, fencing_token = $5, intent_at = statement_timestamp(),
             reconcile_after = statement_timestamp() + ($6::double precision * interval '1 millisecond'),
             resolution = $7
       WHERE workflow_id = $8 AND step_name = $9 AND idempotency_key = $10
         AND status = 'intent' AND attempt = $11
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, EXISTS (SELECT 1 FROM retaken) AS retaken;
