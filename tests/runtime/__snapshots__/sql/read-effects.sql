-- readEffectsStatement: a step's ledger rows
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "debit"

    SELECT idempotency_key, status, kind, request_hash, effect, attempt, fencing_token, intent_at::text AS intent_at
      FROM ledgerflow.step_effect WHERE workflow_id = $1 AND step_name = $2;
