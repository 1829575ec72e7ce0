-- parkRunStatement: reconcile inconclusive; the run goes back to needs_reconciliation
--
-- $1 = "{\"name\":\"NeedsReconciliation\",\"message\":\"reconcile could not tell: 503\",\"step\":\"charge\",\"key\":\"order-42-charge\",\"exhausted\":false}"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 8

    UPDATE ledgerflow.workflow_run
       SET status = 'needs_reconciliation', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
           error = $1::jsonb
     WHERE id = $2 AND fencing_token = $3 AND status = 'running'
    RETURNING id;
