-- loadLeasedRunStatement: re-reading a held run after a commit whose outcome is unknown
--
-- $1 = "LeaseExpired"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7

    SELECT r.id, r.workflow_name, r.workflow_version, r.input, r.current_step, r.fencing_token,
           COALESCE(r.deadline_at <= statement_timestamp(), false) AS overdue,
           a.attempt,
           (SELECT count(*) FROM ledgerflow.step_attempt f
             WHERE f.run_id = r.id AND f.step_name = d.step_name AND f.status = 'failed'
               AND ("f"."step_name" IS DISTINCT FROM "r"."budget_step" OR "f"."attempt" > "r"."budget_base"))::int AS prior_failures,
           (SELECT count(*) FROM ledgerflow.step_attempt f
             WHERE f.run_id = r.id AND f.step_name = d.step_name AND f.status = 'abandoned'
               AND f.error->>'name' = $1::text AND ("f"."step_name" IS DISTINCT FROM "r"."budget_step" OR "f"."attempt" > "r"."budget_base"))::int AS crashes,
           false AS repeated_crash,
           (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res
             WHERE res.run_id = r.id AND NOT res.skipped) AS outputs
      FROM ledgerflow.workflow_run r
      LEFT JOIN ledgerflow.workflow_step_def d
        ON d.workflow_name = r.workflow_name AND d.version = r.workflow_version AND d.position = r.current_step
      LEFT JOIN ledgerflow.step_attempt a
        ON a.run_id = r.id AND a.step_name = d.step_name AND a.status = 'running'
     WHERE r.id = $2 AND r.fencing_token = $3 AND r.status = 'running';
