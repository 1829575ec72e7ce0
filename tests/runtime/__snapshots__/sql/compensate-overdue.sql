-- compensateOverdueStatement: running -> pending at the first compensation, at the run's deadline
--
-- $1 = 4
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = "00000000-0000-4000-8000-000000000001"

    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = statement_timestamp(),
             updated_at = statement_timestamp(), compensation = 'failure', current_step = $1::int,
             error = jsonb_build_object('name', 'DeadlineExceeded',
                                        'message', 'the run was still unfinished at its deadline (' || deadline_at || '); compensating')
       WHERE id = $2 AND fencing_token = $3 AND status = 'running'
         AND deadline_at <= statement_timestamp()
      RETURNING id
    ),
    closed AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = jsonb_build_object('name', 'DeadlineExceeded', 'message', 'the run passed its deadline')
       WHERE run_id = $4 AND status = 'running' AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced;
