-- advanceRunStatement: last plain step completes the run, carrying a plain step and two skipped ones before it
--
-- $1 = 0
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = "worker-a"
-- $5 = 30000
-- $6 = 0
-- $7 = 4
-- $8 = "order-payment"
-- $9 = 1
-- $10 = "notify"
-- $11 = "step"
-- $12 = "{\"ok\":true}"
-- $13 = false
-- $14 = 1
-- $15 = 1
-- $16 = "completed"
-- $17 = null
-- $18 = "{\"reserve\":{\"ok\":true},\"notify\":{\"ok\":true}}"
-- $19 = null
-- $20 = null
-- $21 = null
-- $22 = null
-- $23 = null
-- $24 = 100
-- $25 = 100
-- $26 = "[{\"step_name\":\"reserve\",\"kind\":\"step\",\"output\":\"{\\\"ok\\\":true}\",\"skipped\":false,\"attempt\":2,\"started_ago\":100,\"finished_ago\":60,\"first\":true,\"rank\":3},{\"step_name\":\"debit\",\"kind\":\"transactional\",\"output\":null,\"skipped\":true,\"attempt\":1,\"started_ago\":59,\"finished_ago\":58,\"first\":false,\"rank\":2},{\"step_name\":\"charge\",\"kind\":\"external\",\"output\":null,\"skipped\":true,\"attempt\":1,\"started_ago\":57,\"finished_ago\":56,\"first\":false,\"rank\":1}]"
-- $27 = "order-payment"
-- $28 = 1
-- $29 = "00000000-0000-4000-8000-000000000001"
-- $30 = "reserve"
-- $31 = 2
-- $32 = 7
-- $33 = "worker-a"
-- $34 = 40

/* ledgerflow:prepared */ 
    WITH input AS NOT MATERIALIZED (
      SELECT $1::int AS ord, $2::uuid AS run_id, $3::bigint AS fencing_token, $4::text AS worker_id, $5::double precision AS lease_ms,
        $6::int AS from_position, $7::int AS to_position, $8::text AS workflow_name, $9::int AS workflow_version, $10::text AS step_name,
        $11::text AS step_kind, $12::text AS output, $13::boolean AS skipped, $14::int AS attempt, $15::int AS result_attempt,
        $16::text AS target, $17::text AS next_step, $18::text AS run_output, $19::text AS effect_mode, $20::text AS effect_key,
        $21::int AS effect_attempt, $22::text AS request_hash, $23::text AS resolution
    ),
    fenced AS (
      UPDATE ledgerflow.workflow_run r
         SET current_step = i.to_position, updated_at = statement_timestamp(), error = NULL, created_at = LEAST(created_at, statement_timestamp() - $24::double precision * interval '1 millisecond'), deadline_at = deadline_at - GREATEST(created_at - (statement_timestamp() - $25::double precision * interval '1 millisecond'), interval '0'),
             status = 'completed',
             lease_owner = NULL,
             lease_expires_at = NULL,
             finished_at = statement_timestamp(),
             output = i.run_output::jsonb
        FROM input i
       WHERE r.id = i.run_id AND r.fencing_token = i.fencing_token AND r.status = 'running' AND r.current_step = i.from_position
      RETURNING i.ord, r.id, NULL::boolean AS overdue
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status, skipped)
      SELECT i.run_id, i.workflow_name, i.workflow_version, i.step_name, i.step_kind, i.output::jsonb,
             i.result_attempt, i.effect_key, CASE WHEN i.effect_mode IS NOT NULL THEN 'recorded' END, i.skipped
        FROM fenced f JOIN input i ON i.ord = f.ord
      RETURNING 1
    ),
    carried AS (
      SELECT * FROM jsonb_to_recordset($26::jsonb) AS c(
        step_name text, kind text, output text, skipped boolean, attempt int, started_ago double precision,
        finished_ago double precision, first boolean, rank int)
    ),
    carried_result AS (
      -- Dated when each step ended, and before the carrying step's result (now(): its transaction's start).
      INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, skipped, created_at)
      SELECT f.id, $27, $28, c.step_name, c.kind, c.output::jsonb, c.attempt, c.skipped,
             LEAST(statement_timestamp() - c.finished_ago * interval '1 millisecond', now()) - c.rank * interval '2 microseconds'
        FROM fenced f, carried c
      RETURNING 1
    ),
    carried_first AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'succeeded', finished_at = statement_timestamp() - (SELECT c.finished_ago FROM carried c WHERE c.first) * interval '1 millisecond',
             -- Opened by an earlier statement, on its own clock reading: never after the start this statement's measures put it at.
             started_at = LEAST(started_at, statement_timestamp() - (SELECT c.started_ago FROM carried c WHERE c.first) * interval '1 millisecond')
       WHERE run_id = $29 AND step_name = $30 AND attempt = $31 AND status = 'running'
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    ),
    carried_attempt AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT f.id, c.step_name, c.attempt, 'succeeded', $32, $33,
             statement_timestamp() - c.started_ago * interval '1 millisecond',
             statement_timestamp() - c.finished_ago * interval '1 millisecond'
        FROM fenced f, carried c
       WHERE NOT c.first
      RETURNING 1
    ),
    finished AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT i.run_id, i.step_name, i.attempt, 'succeeded', i.fencing_token, i.worker_id, statement_timestamp() - $34::double precision * interval '1 millisecond', statement_timestamp()
        FROM fenced f JOIN input i ON i.ord = f.ord
      RETURNING 1
    )
    SELECT i.ord, f.ord IS NOT NULL AS fenced, NULL::int AS next_attempt, f.overdue,
           false AS effect_exists,
           NULL::jsonb AS claimed
      FROM input i
      LEFT JOIN fenced f ON f.ord = i.ord;
