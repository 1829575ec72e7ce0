-- releaseIntentStatement: not found at the provider after attempts were exhausted; intent released, run failed
--
-- $1 = "charge"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = "{\"name\":\"Error\",\"message\":\"card processor unavailable\",\"step\":\"charge\",\"attempt\":3}"
-- $4 = "00000000-0000-4000-8000-000000000001"
-- $5 = 8
-- $6 = "released by the reconciler: not found at the provider"
-- $7 = "00000000-0000-4000-8000-000000000001"
-- $8 = "charge"
-- $9 = "order-42-charge"
-- $10 = 1

    WITH 
    ends AS (
      SELECT min(d.position) FILTER (WHERE d.compensates IS NOT NULL) AS compensate_from,
             COALESCE(bool_or(d.step_name = $1 AND d.compensates IS NOT NULL), false) AS compensation_over
        FROM ledgerflow.workflow_run r
        JOIN ledgerflow.workflow_step_def d ON d.workflow_name = r.workflow_name AND d.version = r.workflow_version
       WHERE r.id = $2
    ), fenced AS (
      UPDATE ledgerflow.workflow_run
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
             error = $3::jsonb,
             status = CASE WHEN e.compensation_over THEN 'compensation_failed'
                           WHEN e.compensate_from IS NOT NULL THEN 'pending' ELSE 'failed' END,
             finished_at = CASE WHEN e.compensation_over OR e.compensate_from IS NULL THEN statement_timestamp() END,
             compensation = CASE WHEN NOT e.compensation_over AND e.compensate_from IS NOT NULL THEN 'failure' ELSE compensation END,
             current_step = CASE WHEN NOT e.compensation_over AND e.compensate_from IS NOT NULL THEN e.compensate_from ELSE current_step END,
             run_after = CASE WHEN NOT e.compensation_over AND e.compensate_from IS NOT NULL THEN statement_timestamp() ELSE run_after END
        FROM ends e
       WHERE id = $4 AND fencing_token = $5 AND status = 'running'
      RETURNING id
    ),
    released AS (
      UPDATE ledgerflow.step_effect
         SET status = 'released', reconcile_after = NULL, resolution = $6
       WHERE workflow_id = $7 AND step_name = $8 AND idempotency_key = $9
         AND status = 'intent' AND attempt = $10 AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM released) AS released;
