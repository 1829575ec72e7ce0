-- wakeAwaitingCompensationStatement: the settle of an intent wakes the compensation parked on it
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "charge"
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = "charge"
-- $5 = "ledgerflow_runs"

    WITH woken AS (
      UPDATE ledgerflow.workflow_run
         SET status = 'pending', run_after = statement_timestamp(), updated_at = statement_timestamp(), error = error->'cause'
       WHERE id = $1 AND status = 'needs_reconciliation' AND compensation IS NOT NULL
         AND error->>'step' = $2 AND error ? 'awaitedBy'
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = $3 AND e.step_name = $4 AND e.status = 'intent')
      RETURNING id
    )
    SELECT id, pg_notify($5, id::text) FROM woken;
