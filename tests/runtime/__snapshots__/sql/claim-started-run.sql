-- claimStartedRunStatement: a start claims the run it just inserted for the worker of its process (same transaction)
--
-- $1 = ["order-payment","refund"]
-- $2 = [1,2]
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = 1
-- $5 = "worker-a"
-- $6 = 30000
-- $7 = "LeaseExpired"
-- $8 = "worker-a"

/* ledgerflow:prepared */ WITH 
    candidate AS (
      SELECT r.id
        FROM ledgerflow.workflow_run r
       WHERE r.status IN ('pending', 'waiting') AND r.run_after <= statement_timestamp() AND (r.workflow_name, r.workflow_version) IN (SELECT * FROM unnest($1::text[], $2::int[])) AND r.id = $3::uuid
       ORDER BY r.run_after
       LIMIT $4
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    claimed AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running',
             waiting_for = NULL,
             lease_owner = $5,
             lease_expires_at = statement_timestamp() + ($6::double precision * interval '1 millisecond'),
             fencing_token = r.fencing_token + 1,
             updated_at = statement_timestamp()
        FROM candidate c
       WHERE r.id = c.id
      RETURNING r.id, r.workflow_name, r.workflow_version, r.input, r.current_step, r.fencing_token, r.budget_step, r.budget_base,
                COALESCE(r.deadline_at <= statement_timestamp(), false) AS overdue, r.trace_context
    ),
    history AS (
      SELECT c.id AS run_id, d.step_name, c.fencing_token,
             COALESCE(max(a.attempt), 0) AS last_attempt,
             count(a.attempt) FILTER (WHERE a.status = 'failed' AND ("a"."step_name" IS DISTINCT FROM "c"."budget_step" OR "a"."attempt" > "c"."budget_base"))::int AS failures,
             count(a.attempt) FILTER (WHERE a.status = 'abandoned' AND a.error->>'name' = $7::text
                                        AND ("a"."step_name" IS DISTINCT FROM "c"."budget_step" OR "a"."attempt" > "c"."budget_base"))::int AS crashes
        FROM claimed c
        JOIN ledgerflow.workflow_step_def d
          ON d.workflow_name = c.workflow_name AND d.version = c.workflow_version AND d.position = c.current_step
        LEFT JOIN ledgerflow.step_attempt a ON a.run_id = c.id AND a.step_name = d.step_name
       GROUP BY c.id, d.step_name, c.fencing_token, c.budget_step, c.budget_base
    ),
    opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT h.run_id, h.step_name, h.last_attempt + 1, 'running', h.fencing_token, $8, statement_timestamp()
        FROM history h
       WHERE true
      RETURNING run_id, attempt
    ) 
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
      FROM claimed c
      LEFT JOIN history h ON h.run_id = c.id
      
      LEFT JOIN opened o ON o.run_id = c.id;
