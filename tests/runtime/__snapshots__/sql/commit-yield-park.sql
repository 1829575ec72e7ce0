-- commitYieldStatement: park the run in needs_reconciliation (reconcile said unknown)
--
-- $1 = "{\"name\":\"NeedsReconciliation\",\"message\":\"reconcile could not tell whether key \\\"order-42-charge\\\" was applied: 503\",\"step\":\"charge\",\"key\":\"order-42-charge\",\"exhausted\":false}"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = "{\"name\":\"NeedsReconciliation\",\"message\":\"reconcile could not tell whether key \\\"order-42-charge\\\" was applied: 503\"}"
-- $5 = null
-- $6 = "00000000-0000-4000-8000-000000000001"
-- $7 = "charge"
-- $8 = 2
-- $9 = 10000
-- $10 = "parked: reconcile could not tell whether key \"order-42-charge\" was applied: 503"
-- $11 = "00000000-0000-4000-8000-000000000001"
-- $12 = "charge"
-- $13 = "order-42-charge"

    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(), status = 'needs_reconciliation',
            error = $1::jsonb
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
    ),
    asked AS (
      -- This attempt asked the provider and it could not tell: the next lookup waits a backoff.
      UPDATE ledgerflow.step_effect
         SET reconcile_attempts = reconcile_attempts + 1,
             reconcile_after = statement_timestamp() + ($9::double precision * interval '1 millisecond'),
             resolution = $10
       WHERE workflow_id = $11 AND step_name = $12 AND idempotency_key = $13 AND status = 'intent'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced;
