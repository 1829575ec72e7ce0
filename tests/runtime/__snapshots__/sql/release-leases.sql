-- releaseLeasesStatement: a stopping worker gives two runs back
--
-- $1 = ["00000000-0000-4000-8000-000000000001","00000000-0000-4000-8000-000000000002"]
-- $2 = [7,3]
-- $3 = "worker worker-a stopped before the step finished"

    WITH mine AS (
      SELECT * FROM unnest($1::uuid[], $2::bigint[])
        AS m(id, fencing_token)
    ),
    released AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = statement_timestamp(), updated_at = statement_timestamp()
        FROM mine m
       WHERE r.id = m.id AND r.fencing_token = m.fencing_token AND r.status = 'running'
      RETURNING r.id
    ),
    closed AS (
      UPDATE ledgerflow.step_attempt a
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = jsonb_build_object('name', 'WorkerStopped', 'message', $3::text)
        FROM released x
       WHERE a.run_id = x.id AND a.status = 'running'
      RETURNING a.run_id
    )
    SELECT id FROM released;
