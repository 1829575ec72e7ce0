-- advanceRunStatement: the last step completes the run and claims up to 3 pending runs in the same statement
--
-- $1 = "{\"notify\":{\"ok\":true}}"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = 3
-- $5 = "order-payment"
-- $6 = 1
-- $7 = "notify"
-- $8 = "step"
-- $9 = "{\"ok\":true}"
-- $10 = 2
-- $11 = null
-- $12 = null
-- $13 = "00000000-0000-4000-8000-000000000001"
-- $14 = "notify"
-- $15 = 2
-- $16 = ["order-payment","refund"]
-- $17 = [1,2]
-- $18 = 3
-- $19 = "worker-a"
-- $20 = 30000
-- $21 = "LeaseExpired"
-- $22 = "worker-a"

/* ledgerflow:prepared */ 
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET current_step = current_step + 1, updated_at = statement_timestamp(), error = NULL, status = 'completed', lease_owner = NULL, lease_expires_at = NULL, finished_at = statement_timestamp(),
              output = $1::jsonb
       WHERE id = $2 AND fencing_token = $3 AND status = 'running'
         AND current_step = $4 
      RETURNING id
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
          RETURNING 1)  , 
    fused_candidate AS (
      SELECT r.id
        FROM ledgerflow.workflow_run r
       WHERE r.status IN ('pending', 'waiting') AND r.run_after <= statement_timestamp() AND (r.workflow_name, r.workflow_version) IN (SELECT * FROM unnest($16::text[], $17::int[])) AND EXISTS (SELECT 1 FROM fenced)
       ORDER BY r.run_after
       LIMIT $18
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    fused_claimed AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running',
             waiting_for = NULL,
             lease_owner = $19,
             lease_expires_at = statement_timestamp() + ($20::double precision * interval '1 millisecond'),
             fencing_token = r.fencing_token + 1,
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
             count(a.attempt) FILTER (WHERE a.status = 'abandoned' AND a.error->>'name' = $21::text
                                        AND ("a"."step_name" IS DISTINCT FROM "c"."budget_step" OR "a"."attempt" > "c"."budget_base"))::int AS crashes
        FROM fused_claimed c
        JOIN ledgerflow.workflow_step_def d
          ON d.workflow_name = c.workflow_name AND d.version = c.workflow_version AND d.position = c.current_step
        LEFT JOIN ledgerflow.step_attempt a ON a.run_id = c.id AND a.step_name = d.step_name
       GROUP BY c.id, d.step_name, c.fencing_token, c.budget_step, c.budget_base
    ),
    fused_opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT h.run_id, h.step_name, h.last_attempt + 1, 'running', h.fencing_token, $22, statement_timestamp()
        FROM fused_history h
       WHERE true
      RETURNING run_id, attempt
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           NULL::int AS next_attempt,
           (SELECT COALESCE(jsonb_agg(f), '[]'::jsonb) FROM (
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
      
      LEFT JOIN fused_opened o ON o.run_id = c.id) f) AS claimed,
           false AS effect_exists;
