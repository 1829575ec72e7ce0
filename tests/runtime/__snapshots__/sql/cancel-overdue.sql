-- cancelOverdueStatement: running -> cancelled at the run's deadline
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = 7

    WITH fenced AS (
      UPDATE ledgerflow.workflow_run
         SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, fencing_token = ledgerflow.next_fencing_token(fencing_token),
             finished_at = statement_timestamp(), updated_at = statement_timestamp(),
             error = jsonb_build_object('name', 'DeadlineExceeded',
                                        'message', 'the run was still unfinished at its deadline (' || deadline_at || ')')
       WHERE id = $1 AND fencing_token = $2 AND status = 'running'
         AND deadline_at <= statement_timestamp()
      RETURNING id
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced;
