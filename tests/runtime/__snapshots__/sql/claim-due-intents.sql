-- claimDueIntentsStatement: up to 10 open intents past their horizon, held 30 s
--
-- $1 = null
-- $2 = ["order-payment","refund"]
-- $3 = [1,2]
-- $4 = null
-- $5 = ["order-payment"]
-- $6 = [1]
-- $7 = ["charge"]
-- $8 = 10
-- $9 = 30000

    WITH due AS (
      SELECT e.workflow_id, e.step_name, e.idempotency_key
        FROM ledgerflow.step_effect e
        JOIN ledgerflow.workflow_run r ON r.id = e.workflow_id
       WHERE e.status = 'intent' AND e.kind = 'external' AND e.reconcile_after <= COALESCE($1::timestamptz, statement_timestamp())
         AND (r.workflow_name, r.workflow_version) IN (SELECT * FROM unnest($2::text[], $3::int[]))
         AND (
           r.status IN ('cancelled', 'failed', 'compensated', 'compensation_failed')
           -- A run being compensated: its steps' intents are settled in the ledger only (compensation.ts).
           OR (r.compensation IS NOT NULL AND EXISTS (
                 SELECT 1 FROM ledgerflow.workflow_step_def d
                  WHERE d.workflow_name = r.workflow_name AND d.version = r.workflow_version
                    AND d.step_name = e.step_name AND d.compensates IS NULL))
           OR ((r.status IN ('pending', 'needs_reconciliation') OR (r.status = 'running' AND r.lease_expires_at <= COALESCE($4::timestamptz, statement_timestamp())))
               AND (r.workflow_name, r.workflow_version, e.step_name) IN (
                 SELECT * FROM unnest($5::text[], $6::int[],
                                      $7::text[])))
         )
       ORDER BY e.reconcile_after
       LIMIT $8
         FOR NO KEY UPDATE OF e SKIP LOCKED
    ),
    claimed AS (
      UPDATE ledgerflow.step_effect e
         SET reconcile_after = statement_timestamp() + ($9::double precision * interval '1 millisecond'), reconcile_attempts = e.reconcile_attempts + 1
        FROM due d
       WHERE e.workflow_id = d.workflow_id AND e.step_name = d.step_name AND e.idempotency_key = d.idempotency_key
      RETURNING e.workflow_id, e.step_name, e.idempotency_key, e.request_hash, e.attempt, e.intent_at, e.reconcile_attempts
    )
    SELECT c.workflow_id AS run_id, c.step_name, c.idempotency_key, c.request_hash, c.attempt, c.intent_at, c.reconcile_attempts,
           r.workflow_name, r.workflow_version, r.status AS run_status, r.current_step, r.input,
           r.trace_context, r.compensation
      FROM claimed c JOIN ledgerflow.workflow_run r ON r.id = c.workflow_id
     ORDER BY c.intent_at;
