-- advanceRunStatement: last plain step completes the run, carrying a plain step and two skipped ones before it
--
-- $1 = 4
-- $2 = "{\"reserve\":{\"ok\":true},\"notify\":{\"ok\":true}}"
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = 7
-- $5 = 0
-- $6 = "order-payment"
-- $7 = 1
-- $8 = "notify"
-- $9 = "step"
-- $10 = "{\"ok\":true}"
-- $11 = 1
-- $12 = null
-- $13 = null
-- $14 = "[{\"step_name\":\"reserve\",\"kind\":\"step\",\"output\":\"{\\\"ok\\\":true}\",\"skipped\":false,\"attempt\":2,\"started_ago\":100,\"finished_ago\":60,\"first\":true,\"rank\":3},{\"step_name\":\"debit\",\"kind\":\"transactional\",\"output\":null,\"skipped\":true,\"attempt\":1,\"started_ago\":59,\"finished_ago\":58,\"first\":false,\"rank\":2},{\"step_name\":\"charge\",\"kind\":\"external\",\"output\":null,\"skipped\":true,\"attempt\":1,\"started_ago\":57,\"finished_ago\":56,\"first\":false,\"rank\":1}]"
-- $15 = "order-payment"
-- $16 = 1
-- $17 = "00000000-0000-4000-8000-000000000001"
-- $18 = "reserve"
-- $19 = 2
-- $20 = 7
-- $21 = "worker-a"
-- $22 = "notify"
-- $23 = 1
-- $24 = 7
-- $25 = "worker-a"
-- $26 = 40

/* ledgerflow:prepared */ 
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = $1, updated_at = statement_timestamp(), error = NULL, status = 'completed', lease_owner = NULL, lease_expires_at = NULL, finished_at = statement_timestamp(),
              output = $2::jsonb
       WHERE id = $3 AND fencing_token = $4 AND status = 'running'
         AND current_step = $5 
      RETURNING id
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
      SELECT id, $6, $7, $8, $9, $10::jsonb,
             $11, $12::text, $13::text
        FROM fenced
      RETURNING 1
    )
     ,
    carried AS (
      SELECT * FROM jsonb_to_recordset($14::jsonb) AS c(
        step_name text, kind text, output text, skipped boolean, attempt int, started_ago double precision,
        finished_ago double precision, first boolean, rank int)
    ),
    carried_result AS (
      -- Dated when each step ended, and before the carrying step's result (now(): its transaction's start).
      INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, skipped, created_at)
      SELECT f.id, $15, $16, c.step_name, c.kind, c.output::jsonb, c.attempt, c.skipped,
             LEAST(statement_timestamp() - c.finished_ago * interval '1 millisecond', now()) - c.rank * interval '2 microseconds'
        FROM fenced f, carried c
      RETURNING 1
    ),
    carried_first AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'succeeded', finished_at = statement_timestamp() - (SELECT c.finished_ago FROM carried c WHERE c.first) * interval '1 millisecond',
             -- Opened by an earlier statement, on its own clock reading: never after the start this statement's measures put it at.
             started_at = LEAST(started_at, statement_timestamp() - (SELECT c.started_ago FROM carried c WHERE c.first) * interval '1 millisecond')
       WHERE run_id = $17 AND step_name = $18 AND attempt = $19 AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    ),
    carried_attempt AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT f.id, c.step_name, c.attempt, 'succeeded', $20, $21,
             statement_timestamp() - c.started_ago * interval '1 millisecond',
             statement_timestamp() - c.finished_ago * interval '1 millisecond'
        FROM fenced f, carried c
       WHERE NOT c.first
      RETURNING 1
    ), finished AS (
          INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
          SELECT f.id, $22, $23, 'succeeded', $24, $25,
                 statement_timestamp() - $26::double precision * interval '1 millisecond', statement_timestamp()
            FROM fenced f
          RETURNING 1)  
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           NULL::int AS next_attempt,
           NULL::jsonb AS claimed,
           false AS effect_exists;
