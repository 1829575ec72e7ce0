-- settleFinishedRunIntentStatement: a cancelled or failed run's intent not found at the provider: released
--
-- $1 = "released"
-- $2 = "released by the reconciler after the run is cancelled: not found at the provider"
-- $3 = null
-- $4 = false
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = "charge"
-- $7 = "order-42-charge"
-- $8 = 1
-- $9 = "00000000-0000-4000-8000-000000000001"

    UPDATE ledgerflow.step_effect
       SET status = $1, reconcile_after = NULL, resolution = $2,
           effect = COALESCE($3::jsonb, effect),
           recorded_at = CASE WHEN $4::boolean THEN statement_timestamp() ELSE recorded_at END
     WHERE workflow_id = $5 AND step_name = $6 AND idempotency_key = $7
       AND status = 'intent' AND attempt = $8
       AND EXISTS (SELECT 1 FROM ledgerflow.workflow_run r WHERE r.id = $9
                    AND (r.status IN ('cancelled', 'failed', 'compensated', 'compensation_failed') OR r.compensation IS NOT NULL))
    RETURNING true AS settled;
