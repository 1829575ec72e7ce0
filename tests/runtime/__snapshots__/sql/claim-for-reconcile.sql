-- claimForReconcileStatement: the reconciler takes a run nobody holds (pending, parked, or expired lease)
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = 2
-- $3 = "reconciler-a"
-- $4 = 30000
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = "00000000-0000-4000-8000-000000000001"
-- $7 = "00000000-0000-4000-8000-000000000001"
-- $8 = "charge"

    WITH target AS (
      SELECT id, status AS previous_status, error AS previous_error
        FROM ledgerflow.workflow_run
       WHERE id = $1 AND current_step = $2
         AND (status IN ('pending', 'needs_reconciliation') OR (status = 'running' AND lease_expires_at <= statement_timestamp()))
         FOR NO KEY UPDATE SKIP LOCKED
    ),
    claimed AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running', lease_owner = $3, lease_expires_at = statement_timestamp() + ($4::double precision * interval '1 millisecond'),
             fencing_token = ledgerflow.next_fencing_token(r.fencing_token), updated_at = statement_timestamp()
        FROM target t
       WHERE r.id = t.id
      RETURNING r.fencing_token
    ),
    abandoned AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = jsonb_build_object('name', 'LeaseExpired', 'message', 'the run was taken over by the reconciler')
       WHERE run_id = $5 AND status = 'running' AND EXISTS (SELECT 1 FROM claimed)
      RETURNING 1
    )
    SELECT c.fencing_token, t.previous_status, t.previous_error,
           (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res
             WHERE res.run_id = $6 AND NOT res.skipped) AS outputs,
           (SELECT count(*) FROM ledgerflow.step_attempt a JOIN ledgerflow.workflow_run r ON r.id = a.run_id
             WHERE a.run_id = $7 AND a.step_name = $8 AND a.status = 'failed'
               AND ("a"."step_name" IS DISTINCT FROM "r"."budget_step" OR "a"."attempt" > "r"."budget_base"))::int AS failures
      FROM claimed c, target t;
