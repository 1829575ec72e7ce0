-- compensatedEffectStatement: the ledger row of the step a compensation undoes
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "charge"

    SELECT status, effect, reconcile_after, idempotency_key, reconcile_attempts, resolution
      FROM ledgerflow.step_effect
     WHERE workflow_id = $1 AND step_name = $2
     ORDER BY CASE status WHEN 'recorded' THEN 0 WHEN 'intent' THEN 1 ELSE 2 END
     LIMIT 1;
