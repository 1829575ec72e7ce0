-- advanceRunStatement: the last step completes the run and claims up to 3 pending runs in the same statement
--
-- $1 = 0
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = "worker-a"
-- $5 = 30000
-- $6 = 3
-- $7 = 4
-- $8 = "order-payment"
-- $9 = 1
-- $10 = "notify"
-- $11 = "step"
-- $12 = "{\"ok\":true}"
-- $13 = false
-- $14 = 2
-- $15 = 2
-- $16 = "completed"
-- $17 = null
-- $18 = "{\"notify\":{\"ok\":true}}"
-- $19 = null
-- $20 = null
-- $21 = null
-- $22 = null
-- $23 = null
-- $24 = ["order-payment","refund"]
-- $25 = [1,2]
-- $26 = 3
-- $27 = "worker-a"
-- $28 = 30000
-- $29 = "LeaseExpired"
-- $30 = "worker-a"
-- $31 = 0

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
    finished AS (
      UPDATE ledgerflow.step_attempt a SET status = 'succeeded', finished_at = statement_timestamp()
        FROM fenced f JOIN input i ON i.ord = f.ord
       WHERE a.run_id = i.run_id AND a.step_name = i.step_name AND a.attempt = i.attempt AND a.status = 'running'
      RETURNING 1
    ), 
    fused_candidate AS (
      SELECT r.id
        FROM ledgerflow.workflow_run r
       WHERE r.status IN ('pending', 'waiting') AND r.run_after <= statement_timestamp() AND (r.workflow_name, r.workflow_version) IN (SELECT * FROM unnest($24::text[], $25::int[])) AND EXISTS (SELECT 1 FROM fenced)
       ORDER BY r.run_after
       LIMIT $26
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    fused_claimed AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running',
             waiting_for = NULL,
             lease_owner = $27,
             lease_expires_at = statement_timestamp() + ($28::double precision * interval '1 millisecond'),
             fencing_token = ledgerflow.next_fencing_token(r.fencing_token),
             updated_at = statement_timestamp()
        FROM fused_candidate c
       WHERE r.id = c.id
      RETURNING r.id, r.workflow_name, r.workflow_version, r.input, r.current_step, r.fencing_token, r.budget_step, r.budget_base,
                COALESCE(r.deadline_at <= statement_timestamp(), false) AS overdue, r.trace_context
    ),
    fused_history AS (
      SELECT c.id AS run_id, d.step_name, c.fencing_token,
             COALESCE(max(a.attempt), 0) AS last_attempt,
             count(a.attempt) FILTER (WHERE a.status = 'failed' AND ("a"."step_name" IS DISTINCT FROM "c"."budget_step" OR "a"."attempt" > "c"."budget_base"))::int AS failures,
             count(a.attempt) FILTER (WHERE a.status = 'abandoned' AND a.error->>'name' = $29::text
                                        AND ("a"."step_name" IS DISTINCT FROM "c"."budget_step" OR "a"."attempt" > "c"."budget_base"))::int AS crashes
        FROM fused_claimed c
        JOIN ledgerflow.workflow_step_def d
          ON d.workflow_name = c.workflow_name AND d.version = c.workflow_version AND d.position = c.current_step
        LEFT JOIN ledgerflow.step_attempt a ON a.run_id = c.id AND a.step_name = d.step_name
       GROUP BY c.id, d.step_name, c.fencing_token, c.budget_step, c.budget_base
    ),
    fused_opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT h.run_id, h.step_name, h.last_attempt + 1, 'running', h.fencing_token, $30, statement_timestamp()
        FROM fused_history h
       WHERE true
      RETURNING run_id, attempt
    )
    SELECT i.ord, f.ord IS NOT NULL AS fenced, NULL::int AS next_attempt, f.overdue,
           false AS effect_exists,
           CASE WHEN i.ord = $31 THEN (SELECT COALESCE(jsonb_agg(c), '[]'::jsonb) FROM (
    SELECT c.id, c.workflow_name, c.workflow_version, c.input, c.current_step, c.fencing_token, c.overdue,
           o.attempt,
           COALESCE(h.failures, 0) AS prior_failures,
           COALESCE(h.crashes, 0) + (CASE WHEN false THEN 1 ELSE 0 END) AS crashes,
           (false AND COALESCE(h.crashes, 0) > 0) AS repeated_crash,
           false AS took_over, c.trace_context,
           CASE WHEN c.current_step > 0 THEN
             (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res
               WHERE res.run_id = c.id AND NOT res.skipped)
           END AS outputs
      FROM fused_claimed c
      LEFT JOIN fused_history h ON h.run_id = c.id
      
      LEFT JOIN fused_opened o ON o.run_id = c.id) c) END AS claimed
      FROM input i
      LEFT JOIN fenced f ON f.ord = i.ord;
