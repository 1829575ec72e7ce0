-- compensatingCancelStatement: a cancel that compensates (asked, or the workflow's default): pending at the first compensation
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "pending"
-- $3 = "running"
-- $4 = "waiting"
-- $5 = "needs_reconciliation"
-- $6 = null
-- $7 = "ledgerflow_runs"

    WITH target AS (
      SELECT r.id,
             (SELECT min(d.position) FROM ledgerflow.workflow_step_def d
               WHERE d.workflow_name = r.workflow_name AND d.version = r.workflow_version AND d.compensates IS NOT NULL) AS compensate_from
        FROM ledgerflow.workflow_run r
        JOIN ledgerflow.workflow_version v ON v.workflow_name = r.workflow_name AND v.version = r.workflow_version
       WHERE r.id = $1 AND r.status IN ($2, $3, $4, $5) AND r.compensation IS NULL
         AND COALESCE($6::boolean, v.compensate_on_cancel)
         FOR NO KEY UPDATE OF r
    ),
    moved AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'pending', compensation = 'cancel', current_step = t.compensate_from,
             run_after = statement_timestamp(), updated_at = statement_timestamp(),
             lease_owner = NULL, lease_expires_at = NULL, waiting_for = NULL, fencing_token = ledgerflow.next_fencing_token(r.fencing_token),
             error = jsonb_build_object('name', 'Cancelled', 'message', 'the run was cancelled; compensating its recorded effects')
        FROM target t
       WHERE r.id = t.id AND t.compensate_from IS NOT NULL
      RETURNING r.id
    ),
    closed AS (
      UPDATE ledgerflow.step_attempt a
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = jsonb_build_object('name', 'Cancelled', 'message', 'the run was cancelled')
        FROM moved m
       WHERE a.run_id = m.id AND a.status = 'running'
      RETURNING 1
    )
    -- Due now for its first compensation: announced like every run made due.
    SELECT id, pg_notify($7, id::text) AS notified FROM moved;
