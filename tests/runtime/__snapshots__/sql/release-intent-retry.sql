-- releaseIntentStatement: not found at the provider; intent released, run retried after 2 s
--
-- $1 = 2000
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 8
-- $4 = "released by the reconciler: not found at the provider"
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = "charge"
-- $7 = "order-42-charge"
-- $8 = 1

    WITH  fenced AS (
      UPDATE ledgerflow.workflow_run
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
             status = 'pending', run_after = statement_timestamp() + ($1::double precision * interval '1 millisecond'), error = NULL
       WHERE id = $2 AND fencing_token = $3 AND status = 'running'
      RETURNING id
    ),
    released AS (
      UPDATE ledgerflow.step_effect
         SET status = 'released', reconcile_after = NULL, resolution = $4
       WHERE workflow_id = $5 AND step_name = $6 AND idempotency_key = $7
         AND status = 'intent' AND attempt = $8 AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM released) AS released;
