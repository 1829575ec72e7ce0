-- advanceRunStatement: last plain step completes the run, carrying a plain step and two skipped ones before it
--
-- $1 = 4
-- $2 = 100
-- $3 = 100
-- $4 = "{\"reserve\":{\"ok\":true},\"notify\":{\"ok\":true}}"
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = 7
-- $7 = 0
-- $8 = "order-payment"
-- $9 = 1
-- $10 = "notify"
-- $11 = "step"
-- $12 = "{\"ok\":true}"
-- $13 = 1
-- $14 = null
-- $15 = null
-- $16 = "[{\"step_name\":\"reserve\",\"kind\":\"step\",\"output\":\"{\\\"ok\\\":true}\",\"skipped\":false,\"attempt\":2,\"started_ago\":100,\"finished_ago\":60,\"first\":true,\"rank\":3},{\"step_name\":\"debit\",\"kind\":\"transactional\",\"output\":null,\"skipped\":true,\"attempt\":1,\"started_ago\":59,\"finished_ago\":58,\"first\":false,\"rank\":2},{\"step_name\":\"charge\",\"kind\":\"external\",\"output\":null,\"skipped\":true,\"attempt\":1,\"started_ago\":57,\"finished_ago\":56,\"first\":false,\"rank\":1}]"
-- $17 = "order-payment"
-- $18 = 1
-- $19 = "00000000-0000-4000-8000-000000000001"
-- $20 = "reserve"
-- $21 = 2
-- $22 = 7
-- $23 = "worker-a"
-- $24 = "notify"
-- $25 = 1
-- $26 = 7
-- $27 = "worker-a"
-- $28 = 40

/* ledgerflow:prepared */ 
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = $1, created_at = LEAST(created_at, statement_timestamp() - $2::double precision * interval '1 millisecond'), deadline_at = deadline_at - GREATEST(created_at - (statement_timestamp() - $3::double precision * interval '1 millisecond'), interval '0'), updated_at = statement_timestamp(), error = NULL, status = 'completed', lease_owner = NULL, lease_expires_at = NULL, finished_at = statement_timestamp(),
              output = $4::jsonb
       WHERE id = $5 AND fencing_token = $6 AND status = 'running'
         AND current_step = $7 
      RETURNING id
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
      SELECT id, $8, $9, $10, $11, $12::jsonb,
             $13, $14::text, $15::text
        FROM fenced
      RETURNING 1
    )
     ,
    carried AS (
      SELECT * FROM jsonb_to_recordset($16::jsonb) AS c(
        step_name text, kind text, output text, skipped boolean, attempt int, started_ago double precision,
        finished_ago double precision, first boolean, rank int)
    ),
    carried_result AS (
      -- Dated when each step ended, and before the carrying step's result (now(): its transaction's start).
      INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, skipped, created_at)
      SELECT f.id, $17, $18, c.step_name, c.kind, c.output::jsonb, c.attempt, c.skipped,
             LEAST(statement_timestamp() - c.finished_ago * interval '1 millisecond', now()) - c.rank * interval '2 microseconds'
        FROM fenced f, carried c
      RETURNING 1
    ),
    carried_first AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'succeeded', finished_at = statement_timestamp() - (SELECT c.finished_ago FROM carried c WHERE c.first) * interval '1 millisecond',
             -- Opened by an earlier statement, on its own clock reading: never after the start this statement's measures put it at.
             started_at = LEAST(started_at, statement_timestamp() - (SELECT c.started_ago FROM carried c WHERE c.first) * interval '1 millisecond')
       WHERE run_id = $19 AND step_name = $20 AND attempt = $21 AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    ),
    carried_attempt AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT f.id, c.step_name, c.attempt, 'succeeded', $22, $23,
             statement_timestamp() - c.started_ago * interval '1 millisecond',
             statement_timestamp() - c.finished_ago * interval '1 millisecond'
        FROM fenced f, carried c
       WHERE NOT c.first
      RETURNING 1
    ), finished AS (
          INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
          SELECT f.id, $24, $25, 'succeeded', $26, $27,
                 statement_timestamp() - $28::double precision * interval '1 millisecond', statement_timestamp()
            FROM fenced f
          RETURNING 1)  
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           NULL::int AS next_attempt,
           NULL::jsonb AS claimed,
           false AS effect_exists;
