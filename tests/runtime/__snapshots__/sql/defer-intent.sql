-- deferIntentStatement: an inconclusive lookup; asked again after a backoff
--
-- $1 = 10000
-- $2 = "parked: reconcile could not tell: 503"
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = "charge"
-- $5 = "order-42-charge"
-- $6 = 1

    UPDATE ledgerflow.step_effect
       SET reconcile_after = statement_timestamp() + ($1::double precision * interval '1 millisecond'), resolution = $2
     WHERE workflow_id = $3 AND step_name = $4 AND idempotency_key = $5
       AND status = 'intent' AND attempt = $6;
