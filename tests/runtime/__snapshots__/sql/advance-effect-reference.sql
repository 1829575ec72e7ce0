-- advanceRunStatement: external step reusing its recorded ledger row (mode reference), lease held
--
-- $1 = 30000
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = 2
-- $5 = "order-payment"
-- $6 = 1
-- $7 = "charge"
-- $8 = "external"
-- $9 = "{\"ok\":true}"
-- $10 = 2
-- $11 = "order-42-charge"
-- $12 = "recorded"
-- $13 = "00000000-0000-4000-8000-000000000001"
-- $14 = "charge"
-- $15 = 2
-- $16 = "notify"
-- $17 = "notify"
-- $18 = 7
-- $19 = "worker-a"

/* ledgerflow:prepared */ 
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = current_step + 1, updated_at = statement_timestamp(), error = NULL, status = 'running', lease_expires_at = statement_timestamp() + ($1::double precision * interval '1 millisecond')
       WHERE id = $2 AND fencing_token = $3 AND status = 'running'
         AND current_step = $4 
      RETURNING id, deadline_at <= statement_timestamp() AS overdue
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
      SELECT id, $5, $6, $7, $8, $9::jsonb,
             $10, $11::text, $12::text
        FROM fenced
      RETURNING 1
    )
     , finished AS (
          UPDATE ledgerflow.step_attempt SET status = 'succeeded', finished_at = statement_timestamp()
           WHERE run_id = $13 AND step_name = $14 AND attempt = $15 AND status = 'running'
             AND EXISTS (SELECT 1 FROM fenced)
          RETURNING 1) , next AS (
          INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
          SELECT f.id, $16,
                 1 + COALESCE((SELECT max(a.attempt) FROM ledgerflow.step_attempt a
                                WHERE a.run_id = f.id AND a.step_name = $17), 0),
                 'running', $18, $19, statement_timestamp()
            FROM fenced f
          RETURNING attempt) 
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           (SELECT attempt FROM next) AS next_attempt,
           NULL::jsonb AS claimed,
           false AS effect_exists, (SELECT overdue FROM fenced) AS overdue;
