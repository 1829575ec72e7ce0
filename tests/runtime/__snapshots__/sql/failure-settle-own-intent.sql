-- settleOwnIntentStatement: perform refused (NotAppliedError), so the attempt's intent is released
--
-- $1 = true
-- $2 = true
-- $3 = "released: the provider refused the request, NotAppliedError (card rejected: 422)"
-- $4 = true
-- $5 = false
-- $6 = "00000000-0000-4000-8000-000000000001"
-- $7 = "charge"
-- $8 = 2
-- $9 = true
-- $10 = false
-- $11 = "00000000-0000-4000-8000-000000000001"
-- $12 = "charge"

    WITH own AS (
      UPDATE ledgerflow.step_effect
         SET status = CASE WHEN $1::boolean THEN 'released' ELSE status END,
             resolution = CASE WHEN $2::boolean THEN $3::text ELSE resolution END,
             reconcile_after = CASE WHEN $4::boolean THEN NULL
                                    WHEN $5::boolean THEN statement_timestamp()
                                    ELSE reconcile_after END
       WHERE workflow_id = $6 AND step_name = $7 AND status = 'intent' AND attempt = $8
         AND ($9::boolean OR $10::boolean)
      RETURNING idempotency_key, status, reconcile_after
    )
    SELECT COALESCE(o.status, e.status) AS status, COALESCE(o.reconcile_after, e.reconcile_after) AS reconcile_after
      FROM ledgerflow.step_effect e LEFT JOIN own o USING (idempotency_key)
     WHERE e.workflow_id = $11 AND e.step_name = $12;
