-- finishExhaustedStatement: attempts exhausted in a workflow with compensations: the run compensates (pending at its first compensation)
--
-- $1 = "{\"name\":\"Error\",\"message\":\"card processor unavailable\",\"step\":\"reserve\",\"attempt\":3}"
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = "reserve"
-- $4 = 3
-- $5 = null
-- $6 = "00000000-0000-4000-8000-000000000001"
-- $7 = "reserve"
-- $8 = false
-- $9 = "{\"name\":\"Error\",\"message\":\"card processor unavailable\",\"step\":\"reserve\",\"attempt\":3}"
-- $10 = 4
-- $11 = "00000000-0000-4000-8000-000000000001"
-- $12 = "ledgerflow_runs"

    WITH attempt AS (
      UPDATE ledgerflow.step_attempt
         SET status = 'failed', error = $1::jsonb, finished_at = statement_timestamp()
       WHERE run_id = $2 AND step_name = $3 AND attempt = $4::int AND status = 'running'
      RETURNING 1
    ),
    released AS (
      UPDATE ledgerflow.step_effect SET status = 'released', resolution = $5::text
       WHERE workflow_id = $6 AND step_name = $7 AND status = 'intent' AND $8::boolean
      RETURNING 1
    )
    UPDATE ledgerflow.workflow_run
       SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = statement_timestamp(),
           error = $9::jsonb,
           finished_at = NULL,
           compensation = 'failure', current_step = $10::int, run_after = statement_timestamp()
     WHERE id = $11
    RETURNING pg_notify($12, id::text);
