-- claimStatement for workflows with queues: the slot a claimed run’s current step asks for first on the fast path is taken by the claim (core 0024)
--
-- $1 = ["export","mail"]
-- $2 = [1,1]
-- $3 = 16
-- $4 = ["export","mail"]
-- $5 = [1,1]
-- $6 = 16
-- $7 = 16
-- $8 = "worker-a"
-- $9 = 30000
-- $10 = "LeaseExpired"
-- $11 = "LeaseExpired"
-- $12 = "worker-a"
-- $13 = ["export","mail"]
-- $14 = [1,1]
-- $15 = [0,1]
-- $16 = ["exports","mail"]
-- $17 = ["","send"]

/* ledgerflow:prepared */ WITH 
    expired AS (
      SELECT r.id
        FROM ledgerflow.workflow_run r
       WHERE r.status = 'running' AND r.lease_expires_at <= statement_timestamp() AND (r.workflow_name, r.workflow_version) IN (SELECT * FROM unnest($1::text[], $2::int[])) 
       ORDER BY r.lease_expires_at
       LIMIT $3
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    due AS (
      SELECT r.id
        FROM ledgerflow.workflow_run r
       WHERE r.status IN ('pending', 'waiting') AND r.run_after <= statement_timestamp() AND (r.workflow_name, r.workflow_version) IN (SELECT * FROM unnest($4::text[], $5::int[])) 
       ORDER BY r.run_after
       LIMIT $6
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    candidate AS (
      SELECT id FROM expired
      UNION ALL
      SELECT id FROM due
      LIMIT $7
    ),
    claimed AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running',
             waiting_for = NULL,
             lease_owner = $8,
             lease_expires_at = statement_timestamp() + ($9::double precision * interval '1 millisecond'),
             fencing_token = ledgerflow.next_fencing_token(r.fencing_token),
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
             count(a.attempt) FILTER (WHERE a.status = 'abandoned' AND a.error->>'name' = $10::text
                                        AND ("a"."step_name" IS DISTINCT FROM "c"."budget_step" OR "a"."attempt" > "c"."budget_base"))::int AS crashes
        FROM claimed c
        JOIN ledgerflow.workflow_step_def d
          ON d.workflow_name = c.workflow_name AND d.version = c.workflow_version AND d.position = c.current_step
        LEFT JOIN ledgerflow.step_attempt a ON a.run_id = c.id AND a.step_name = d.step_name
       GROUP BY c.id, d.step_name, c.fencing_token, c.budget_step, c.budget_base
    ),
    abandoned AS (
      UPDATE ledgerflow.step_attempt a
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = jsonb_build_object('name', $11::text,
                       'message', 'the worker holding this attempt stopped renewing its lease; the run was claimed again (it may have died in a later plain step: those commit with the next step that must, see carried steps)')
        FROM claimed c
       WHERE a.run_id = c.id AND a.status = 'running'
      RETURNING a.run_id
    ),
    opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT h.run_id, h.step_name, h.last_attempt + 1, 'running', h.fencing_token, $12, statement_timestamp()
        FROM history h
       WHERE h.crashes = 0 OR NOT EXISTS (SELECT 1 FROM abandoned x WHERE x.run_id = h.run_id)
      RETURNING run_id, attempt
    ),
    slot_taken AS MATERIALIZED (
      SELECT c.id AS run_id, u.step
        FROM claimed c
        JOIN unnest($13::text[], $14::int[],
                    $15::int[], $16::text[],
                    $17::text[]) AS u(workflow_name, version, position, queue, step)
          ON u.workflow_name = c.workflow_name AND u.version = c.workflow_version AND u.position = c.current_step
       WHERE CASE WHEN EXISTS (SELECT 1 FROM expired x WHERE x.id = c.id) THEN false
                  ELSE ledgerflow.queue_take_fast(u.queue, '*', c.id, u.step) END
    ) 
    SELECT c.id, c.workflow_name, c.workflow_version, c.input, c.current_step, c.fencing_token, c.overdue,
           o.attempt,
           COALESCE(h.failures, 0) AS prior_failures,
           COALESCE(h.crashes, 0) + (CASE WHEN x.run_id IS NOT NULL THEN 1 ELSE 0 END) AS crashes,
           (x.run_id IS NOT NULL AND COALESCE(h.crashes, 0) > 0) AS repeated_crash,
           x.run_id IS NOT NULL AS took_over, c.trace_context,
           CASE WHEN c.current_step > 0 THEN
             (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res
               WHERE res.run_id = c.id AND NOT res.skipped)
           END AS outputs,
           (SELECT array_agg(t.step) FROM slot_taken t WHERE t.run_id = c.id) AS slots_taken
      FROM claimed c
      LEFT JOIN history h ON h.run_id = c.id
      LEFT JOIN abandoned x ON x.run_id = c.id
      LEFT JOIN opened o ON o.run_id = c.id;
