-- lockFencedRunStatement: first statement of every failure and crash commit
--
-- $1 = "charge"
-- $2 = "charge"
-- $3 = "00000000-0000-4000-8000-000000000001"

    SELECT r.fencing_token, r.status,
           (SELECT count(*) FROM ledgerflow.step_attempt a
             WHERE a.run_id = r.id AND a.step_name = $1 AND a.status = 'failed'
               AND ("a"."step_name" IS DISTINCT FROM "r"."budget_step" OR "a"."attempt" > "r"."budget_base"))::int AS failures,
           (SELECT e.idempotency_key FROM ledgerflow.step_effect e
             WHERE e.workflow_id = r.id AND e.step_name = $2 AND e.status = 'intent') AS open_intent
      FROM ledgerflow.workflow_run r
     WHERE r.id = $3
       FOR NO KEY UPDATE OF r;
