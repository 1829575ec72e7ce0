-- advanceRunsStatement (group commit): three runs' result commits in one statement, each fenced by its own token — a transactional step held, a recorded intent released, a last step completed with a fused claim of up to 3 runs
--
-- $1 = "[{\"ord\":0,\"run_id\":\"00000000-0000-4000-8000-000000000001\",\"fencing_token\":7,\"worker_id\":\"worker-a\",\"lease_ms\":30000,\"from_position\":1,\"to_position\":2,\"workflow_name\":\"order-payment\",\"workflow_version\":1,\"step_name\":\"debit\",\"step_kind\":\"transactional\",\"output\":\"{\\\"ok\\\":true}\",\"skipped\":false,\"attempt\":2,\"result_attempt\":2,\"target\":\"running\",\"next_step\":\"charge\",\"run_output\":null,\"effect_mode\":\"insert-recorded\",\"effect_key\":\"order-42-debit\",\"effect_attempt\":2,\"request_hash\":\"sha256:77aa\",\"resolution\":null},{\"ord\":1,\"run_id\":\"00000000-0000-4000-8000-000000000002\",\"fencing_token\":3,\"worker_id\":\"worker-a\",\"lease_ms\":30000,\"from_position\":2,\"to_position\":3,\"workflow_name\":\"order-payment\",\"workflow_version\":1,\"step_name\":\"charge\",\"step_kind\":\"external\",\"output\":\"{\\\"ok\\\":true}\",\"skipped\":false,\"attempt\":2,\"result_attempt\":2,\"target\":\"pending\",\"next_step\":null,\"run_output\":null,\"effect_mode\":\"record-intent\",\"effect_key\":\"order-43-charge\",\"effect_attempt\":2,\"request_hash\":null,\"resolution\":null},{\"ord\":2,\"run_id\":\"00000000-0000-4000-8000-000000000003\",\"fencing_token\":12,\"worker_id\":\"worker-a\",\"lease_ms\":30000,\"from_position\":3,\"to_position\":4,\"workflow_name\":\"order-payment\",\"workflow_version\":1,\"step_name\":\"notify\",\"step_kind\":\"step\",\"output\":\"{\\\"ok\\\":true}\",\"skipped\":false,\"attempt\":2,\"result_attempt\":2,\"target\":\"completed\",\"next_step\":null,\"run_output\":\"{\\\"notify\\\":{\\\"ok\\\":true}}\",\"effect_mode\":null,\"effect_key\":null,\"effect_attempt\":null,\"request_hash\":null,\"resolution\":null}]"
-- $2 = ["order-payment","refund"]
-- $3 = [1,2]
-- $4 = 2
-- $5 = 3
-- $6 = "worker-a"
-- $7 = 30000
-- $8 = "LeaseExpired"
-- $9 = "worker-a"
-- $10 = 2

/* ledgerflow:prepared */ 
    WITH input AS (
      SELECT * FROM jsonb_to_recordset($1::jsonb) AS i(
        ord int, run_id uuid, fencing_token bigint, worker_id text, lease_ms double precision,
        from_position int, to_position int, workflow_name text, workflow_version int, step_name text,
        step_kind text, output text, skipped boolean, attempt int, result_attempt int,
        target text, next_step text, run_output text, effect_mode text, effect_key text,
        effect_attempt int, request_hash text, resolution text)
    ),
    fenced AS (
      UPDATE ledgerflow.workflow_run r
         SET current_step = i.to_position, updated_at = statement_timestamp(), error = NULL,
             status = CASE i.target WHEN 'running' THEN 'running' WHEN 'pending' THEN 'pending' WHEN 'completed' THEN 'completed' ELSE r.status END,
             lease_expires_at = CASE i.target WHEN 'running' THEN statement_timestamp() + i.lease_ms * interval '1 millisecond' WHEN 'pending' THEN NULL WHEN 'completed' THEN NULL ELSE r.lease_expires_at END,
             lease_owner = CASE i.target WHEN 'pending' THEN NULL WHEN 'completed' THEN NULL ELSE r.lease_owner END,
             run_after = CASE i.target WHEN 'pending' THEN statement_timestamp() ELSE r.run_after END,
             finished_at = CASE i.target WHEN 'completed' THEN statement_timestamp() ELSE r.finished_at END,
             output = CASE i.target WHEN 'completed' THEN i.run_output::jsonb ELSE r.output END
        FROM input i
       WHERE r.id = i.run_id AND r.fencing_token = i.fencing_token AND r.status = 'running' AND r.current_step = i.from_position
         AND (i.effect_mode IS DISTINCT FROM 'insert-recorded' OR NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = i.run_id AND e.step_name = i.step_name))
      RETURNING i.ord, r.id, CASE i.target WHEN 'running' THEN r.deadline_at <= statement_timestamp() ELSE NULL::boolean END AS overdue
    ),
    result AS (
      INSERT INTO ledgerflow.step_result
             (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status, skipped)
      SELECT i.run_id, i.workflow_name, i.workflow_version, i.step_name, i.step_kind, i.output::jsonb,
             i.result_attempt, i.effect_key, CASE WHEN i.effect_mode IS NOT NULL THEN 'recorded' END, i.skipped
        FROM fenced f JOIN input i ON i.ord = f.ord
      RETURNING 1
    ),
    inserted_effect AS (
      INSERT INTO ledgerflow.step_effect
             (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
      SELECT i.run_id, i.step_name, i.effect_key, i.output::jsonb, 'recorded', 'transactional', i.request_hash,
             i.effect_attempt, i.fencing_token, statement_timestamp()
        FROM fenced f JOIN input i ON i.ord = f.ord
       WHERE i.effect_mode = 'insert-recorded'
      RETURNING 1
    ),
    recorded_intent AS (
      UPDATE ledgerflow.step_effect e
         SET status = 'recorded', effect = i.output::jsonb, recorded_at = COALESCE(e.recorded_at, statement_timestamp()),
             resolution = COALESCE(i.resolution, e.resolution)
        FROM fenced f JOIN input i ON i.ord = f.ord
       WHERE i.effect_mode = 'record-intent'
         AND e.workflow_id = i.run_id AND e.step_name = i.step_name AND e.idempotency_key = i.effect_key AND e.status = 'intent' AND e.attempt = i.effect_attempt
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
       WHERE i.target = 'running'
      RETURNING run_id, attempt
    ), 
    fused_candidate AS (
      SELECT r.id
        FROM ledgerflow.workflow_run r
       WHERE r.status IN ('pending', 'waiting') AND r.run_after <= statement_timestamp() AND (r.workflow_name, r.workflow_version) IN (SELECT * FROM unnest($2::text[], $3::int[])) AND EXISTS (SELECT 1 FROM fenced WHERE ord = $4)
       ORDER BY r.run_after
       LIMIT $5
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    fused_claimed AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running',
             waiting_for = NULL,
             lease_owner = $6,
             lease_expires_at = statement_timestamp() + ($7::double precision * interval '1 millisecond'),
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
             count(a.attempt) FILTER (WHERE a.status = 'abandoned' AND a.error->>'name' = $8::text
                                        AND ("a"."step_name" IS DISTINCT FROM "c"."budget_step" OR "a"."attempt" > "c"."budget_base"))::int AS crashes
        FROM fused_claimed c
        JOIN ledgerflow.workflow_step_def d
          ON d.workflow_name = c.workflow_name AND d.version = c.workflow_version AND d.position = c.current_step
        LEFT JOIN ledgerflow.step_attempt a ON a.run_id = c.id AND a.step_name = d.step_name
       GROUP BY c.id, d.step_name, c.fencing_token, c.budget_step, c.budget_base
    ),
    fused_opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT h.run_id, h.step_name, h.last_attempt + 1, 'running', h.fencing_token, $9, statement_timestamp()
        FROM fused_history h
       WHERE true
      RETURNING run_id, attempt
    )
    SELECT i.ord, f.ord IS NOT NULL AS fenced, n.attempt AS next_attempt, f.overdue,
           i.effect_mode = 'insert-recorded' AND EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = i.run_id AND e.step_name = i.step_name) AS effect_exists,
           CASE WHEN i.ord = $10 THEN (SELECT COALESCE(jsonb_agg(c), '[]'::jsonb) FROM (
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
      LEFT JOIN fenced f ON f.ord = i.ord
      LEFT JOIN next n ON n.run_id = i.run_id;
