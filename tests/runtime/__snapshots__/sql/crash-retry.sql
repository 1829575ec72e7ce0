-- crashRetryStatement: a repeated crash below the crash limit backs off 4 s
--
-- $1 = 4000
-- $2 = "00000000-0000-4000-8000-000000000001"

        UPDATE ledgerflow.workflow_run
           SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
               run_after = statement_timestamp() + ($1::double precision * interval '1 millisecond')
         WHERE id = $2
        RETURNING run_after AS retry_at;
