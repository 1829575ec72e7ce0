-- commitYieldStatement: a compensation parks the run until its step's open intent is settled (pending now if it already is)
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = "charge"
-- $4 = "order-42-charge"
-- $5 = "compensation \"refund\" waits for step \"charge\"'s open intent"
-- $6 = "charge"
-- $7 = "order-42-charge"
-- $8 = "charge"
-- $9 = "00000000-0000-4000-8000-000000000001"
-- $10 = 7
-- $11 = "{\"name\":\"NeedsReconciliation\",\"message\":\"compensation \\\"refund\\\" waits for step \\\"charge\\\"'s open intent\"}"
-- $12 = "00000000-0000-4000-8000-000000000001"
-- $13 = "charge"
-- $14 = 1

    WITH run_locked AS (
      SELECT id FROM ledgerflow.workflow_run WHERE id = $1 FOR UPDATE
    ),
    open_intent AS (
      SELECT 1 FROM run_locked, ledgerflow.step_effect e
       WHERE e.workflow_id = $2 AND e.step_name = $3 AND e.idempotency_key = $4 AND e.status = 'intent'
         FOR UPDATE OF e SKIP LOCKED
    ),
    held AS (
      SELECT EXISTS (SELECT 1 FROM open_intent) AS open
    ),
    fenced AS (
      UPDATE ledgerflow.workflow_run r
         SET lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
             status = CASE WHEN h.open THEN 'needs_reconciliation' ELSE 'pending' END,
             run_after = CASE WHEN h.open THEN r.run_after ELSE statement_timestamp() END,
             error = CASE WHEN h.open
                          THEN jsonb_build_object('name', 'NeedsReconciliation', 'message', $5::text, 'step', $6::text,
                                                  'key', $7::text, 'exhausted', false, 'awaitedBy', $8::text, 'cause', r.error)
                          ELSE r.error END
        FROM held h
       WHERE r.id = $9 AND r.fencing_token = $10 AND r.status = 'running'
      RETURNING r.id
    ),
    attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = $11::jsonb
       WHERE run_id = $12 AND step_name = $13 AND attempt = $14 AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced;
