-- advanceRunStatement: last statement of a transactional step's transaction (mode fill-recorded), lease held
--
-- $1 = 0
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = "worker-a"
-- $5 = 30000
-- $6 = 1
-- $7 = 2
-- $8 = "order-payment"
-- $9 = 1
-- $10 = "debit"
-- $11 = "transactional"
-- $12 = "{\"ok\":true}"
-- $13 = false
-- $14 = 2
-- $15 = 2
-- $16 = "running"
-- $17 = "charge"
-- $18 = null
-- $19 = "fill-recorded"
-- $20 = "order-42-debit"
-- $21 = 2
-- $22 = null
-- $23 = null

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
         SET current_step = i.to_position, updated_at = statement_timestamp(), error = NULL,
             status = 'running',
             lease_expires_at = statement_timestamp() + i.lease_ms * interval '1 millisecond'
        FROM input i
       WHERE r.id = i.run_id AND r.fencing_token = i.fencing_token AND r.status = 'running' AND r.current_step = i.from_position
      RETURNING i.ord, r.id, r.deadline_at <= statement_timestamp() AS overdue
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status, skipped)
      SELECT i.run_id, i.workflow_name, i.workflow_version, i.step_name, i.step_kind, i.output::jsonb,
             i.result_attempt, i.effect_key, CASE WHEN i.effect_mode IS NOT NULL THEN 'recorded' END, i.skipped
        FROM fenced f JOIN input i ON i.ord = f.ord
      RETURNING 1
    ),
    filled_effect AS (
      UPDATE ledgerflow.step_effect e
         SET status = 'recorded', effect = i.output::jsonb, recorded_at = COALESCE(e.recorded_at, statement_timestamp()),
             resolution = COALESCE(i.resolution, e.resolution)
        FROM fenced f JOIN input i ON i.ord = f.ord
       WHERE e.workflow_id = i.run_id AND e.step_name = i.step_name AND e.idempotency_key = i.effect_key AND e.status = 'recorded' AND e.attempt = i.effect_attempt
      RETURNING 1
    ),
    finished AS (
      UPDATE ledgerflow.step_attempt a SET status = 'succeeded', finished_at = statement_timestamp()
        FROM fenced f JOIN input i ON i.ord = f.ord
       WHERE a.run_id = i.run_id AND a.step_name = i.step_name AND a.attempt = i.attempt AND a.status = 'running'
      RETURNING 1
    ),
    next AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT i.run_id, i.next_step,
             1 + COALESCE((SELECT max(a.attempt) FROM ledgerflow.step_attempt a
                            WHERE a.run_id = i.run_id AND a.step_name = i.next_step), 0),
             'running', i.fencing_token, i.worker_id, statement_timestamp()
        FROM fenced f JOIN input i ON i.ord = f.ord
      RETURNING run_id, attempt
    )
    SELECT i.ord, f.ord IS NOT NULL AS fenced, n.attempt AS next_attempt, f.overdue,
           false AS effect_exists,
           NULL::jsonb AS claimed,
           (CASE WHEN f.ord IS NOT NULL THEN '0' ELSE 'ledgerflow: the step commit found its run moved on (fencing token or status)' END)::int AS unfenced
      FROM input i
      LEFT JOIN fenced f ON f.ord = i.ord
      LEFT JOIN next n ON n.run_id = i.run_id;
