-- returnRunStatement: the reconciler gives a parked run back untouched
--
-- $1 = "needs_reconciliation"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 8

    UPDATE ledgerflow.workflow_run
       SET status = $1, lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp()
     WHERE id = $2 AND fencing_token = $3 AND status = 'running';
