-- auditStatement: who retried the run, and why
--
-- $1 = "ana"
-- $2 = "retry"
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = "charge"
-- $5 = "card processor fixed (INC-42)"
-- $6 = "{\"previousStatus\":\"failed\"}"

    INSERT INTO ledgerflow.operator_action (actor, action, run_id, target, reason, detail)
    VALUES ($1, $2, $3::uuid, $4, $5, $6::jsonb);
