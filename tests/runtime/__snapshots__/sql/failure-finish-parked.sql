-- finishExhaustedStatement: attempts exhausted with an open intent and a reconcile: the run parks
--
-- $1 = "{\"name\":\"Error\",\"message\":\"card processor unavailable\",\"step\":\"charge\",\"attempt\":3}"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = "charge"
-- $4 = 3
-- $5 = null
-- $6 = "00000000-0000-4000-8000-000000000001"
-- $7 = "charge"
-- $8 = false
-- $9 = "{\"name\":\"NeedsReconciliation\",\"message\":\"attempts exhausted (3/3) on step \\\"charge\\\" while its intent for key \\\"order-42-charge\\\" is open: the effect may have happened (last error: card processor unavailable); the reconciler will look it up\",\"step\":\"charge\",\"key\":\"order-42-charge\",\"exhausted\":true,\"lastError\":{\"name\":\"Error\",\"message\":\"card processor unavailable\",\"step\":\"charge\",\"attempt\":3}}"
-- $10 = "00000000-0000-4000-8000-000000000001"

    WITH attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'failed', error = $1::jsonb, finished_at = statement_timestamp()
       WHERE run_id = $2 AND step_name = $3 AND attempt = $4::int AND status = 'running'
      RETURNING 1
    ),
    released AS (
      UPDATE ledgerflow.step_effect SET status = 'released', resolution = $5::text
       WHERE workflow_id = $6 AND step_name = $7 AND status = 'intent' AND $8::boolean
      RETURNING 1
    )
    UPDATE ledgerflow.workflow_run
       SET status = 'needs_reconciliation', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
           error = $9::jsonb,
           finished_at = NULL
     WHERE id = $10;
