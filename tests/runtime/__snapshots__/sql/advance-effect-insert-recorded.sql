-- advanceRunStatement: transactional step whose handler wrote nothing (mode insert-recorded), lease held
--
-- $1 = 30000
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = 1
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = "debit"
-- $7 = "order-payment"
-- $8 = 1
-- $9 = "debit"
-- $10 = "transactional"
-- $11 = "{\"ok\":true}"
-- $12 = 2
-- $13 = "order-42-debit"
-- $14 = "recorded"
-- $15 = "debit"
-- $16 = "order-42-debit"
-- $17 = "{\"ok\":true}"
-- $18 = "sha256:77aa"
-- $19 = 2
-- $20 = 7
-- $21 = "00000000-0000-4000-8000-000000000001"
-- $22 = "debit"
-- $23 = 2
-- $24 = "charge"
-- $25 = "charge"
-- $26 = 7
-- $27 = "worker-a"
-- $28 = "00000000-0000-4000-8000-000000000001"
-- $29 = "debit"

/* ledgerflow:prepared */ 
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = current_step + 1, updated_at = statement_timestamp(), error = NULL, status = 'running', lease_expires_at = statement_timestamp() + ($1::double precision * interval '1 millisecond')
       WHERE id = $2 AND fencing_token = $3 AND status = 'running'
         AND current_step = $4 AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = $5 AND e.step_name = $6)
      RETURNING id, deadline_at <= statement_timestamp() AS overdue
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
      SELECT id, $7, $8, $9, $10, $11::jsonb,
             $12, $13::text, $14::text
        FROM fenced
      RETURNING 1
    )
    , effect AS (
          INSERT INTO ledgerflow.step_effect
                 (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
          SELECT id, $15, $16, $17::jsonb, 'recorded', 'transactional', $18,
                 $19, $20, statement_timestamp()
            FROM fenced
          RETURNING 1) , finished AS (
          UPDATE ledgerflow.step_attempt SET status = 'succeeded', finished_at = statement_timestamp()
           WHERE run_id = $21 AND step_name = $22 AND attempt = $23 AND status = 'running'
             AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1) , next AS (
          INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
          SELECT f.id, $24,
                 1 + COALESCE((SELECT max(a.attempt) FROM ledgerflow.step_attempt a
                                WHERE a.run_id = f.id AND a.step_name = $25), 0),
                 'running', $26, $27, statement_timestamp()
            FROM fenced f
          RETURNING attempt) 
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           (SELECT attempt FROM next) AS next_attempt,
           NULL::jsonb AS claimed,
           EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = $28 AND e.step_name = $29) AS effect_exists, (SELECT overdue FROM fenced) AS overdue;
