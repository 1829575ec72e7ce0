-- flushCarryStatement: a carried plain step written before a commit that cannot carry it; the run moved on, the next attempt opened
--
-- $1 = 1
-- $2 = 100
-- $3 = 100
-- $4 = 30000
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = 7
-- $7 = 0
-- $8 = "[{\"step_name\":\"reserve\",\"kind\":\"step\",\"output\":\"{\\\"ok\\\":true}\",\"skipped\":false,\"attempt\":2,\"started_ago\":100,\"finished_ago\":60,\"first\":true,\"rank\":1}]"
-- $9 = "order-payment"
-- $10 = 1
-- $11 = "00000000-0000-4000-8000-000000000001"
-- $12 = "reserve"
-- $13 = 2
-- $14 = 7
-- $15 = "worker-a"
-- $16 = "debit"
-- $17 = 1
-- $18 = 7
-- $19 = "worker-a"
-- $20 = 59

/* ledgerflow:prepared */ 
    WITH 
    fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = $1, error = NULL, updated_at = statement_timestamp(), created_at = LEAST(created_at, statement_timestamp() - $2::double precision * interval '1 millisecond'), deadline_at = deadline_at - GREATEST(created_at - (statement_timestamp() - $3::double precision * interval '1 millisecond'), interval '0'),
             lease_expires_at = statement_timestamp() + ($4::double precision * interval '1 millisecond')
       WHERE id = $5 AND fencing_token = $6 AND status = 'running'
         AND current_step = $7
      RETURNING id, deadline_at <= statement_timestamp() AS overdue
    ) ,
    carried AS (
      SELECT * FROM jsonb_to_recordset($8::jsonb) AS c(
        step_name text, kind text, output text, skipped boolean, attempt int, started_ago double precision,
        finished_ago double precision, first boolean, rank int)
    ),
    carried_result AS (
      -- Dated when each step ended, and before the carrying step's result (now(): its transaction's start).
      INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, skipped, created_at)
      SELECT f.id, $9, $10, c.step_name, c.kind, c.output::jsonb, c.attempt, c.skipped,
             LEAST(statement_timestamp() - c.finished_ago * interval '1 millisecond', now()) - c.rank * interval '2 microseconds'
        FROM fenced f, carried c
      RETURNING 1
    ),
    carried_first AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'succeeded', finished_at = statement_timestamp() - (SELECT c.finished_ago FROM carried c WHERE c.first) * interval '1 millisecond',
             -- Opened by an earlier statement, on its own clock reading: never after the start this statement's measures put it at.
             started_at = LEAST(started_at, statement_timestamp() - (SELECT c.started_ago FROM carried c WHERE c.first) * interval '1 millisecond')
       WHERE run_id = $11 AND step_name = $12 AND attempt = $13 AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    ),
    carried_attempt AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT f.id, c.step_name, c.attempt, 'succeeded', $14, $15,
             statement_timestamp() - c.started_ago * interval '1 millisecond',
             statement_timestamp() - c.finished_ago * interval '1 millisecond'
        FROM fenced f, carried c
       WHERE NOT c.first
      RETURNING 1
    ),
    opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT f.id, $16, $17, 'running', $18, $19, statement_timestamp() - $20::double precision * interval '1 millisecond'
        FROM fenced f
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, (SELECT overdue FROM fenced) AS overdue;
