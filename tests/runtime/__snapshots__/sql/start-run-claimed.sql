-- insertRunStatement with claimedBy: a start for the worker of its own process inserts its run already claimed, first attempt opened (one statement)
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "order-payment"
-- $3 = 1
-- $4 = "{\"orderId\":\"order-42\"}"
-- $5 = "order-42"
-- $6 = "worker-a"
-- $7 = 30000
-- $8 = "00000000-0000-4000-8000-000000000001"
-- $9 = "order-payment"
-- $10 = "order-42"
-- $11 = "reserve"
-- $12 = "worker-a"

/* ledgerflow:prepared */ 
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run ("id", "workflow_name", "workflow_version", "input", "dedupe_key", status, lease_owner, lease_expires_at, fencing_token, updated_at)
      SELECT $1::uuid, $2::text, $3::integer, $4::jsonb, $5::text, 'running', $6::text, statement_timestamp() + ($7::double precision * interval '1 millisecond'), ledgerflow.next_fencing_token(0), statement_timestamp()
      WHERE ledgerflow.pruned_run($8::uuid, $9::text, $10::text) IS NULL
      ON CONFLICT DO NOTHING
      RETURNING id, workflow_name, workflow_version, input, current_step, fencing_token, deadline_at, trace_context
    ),
    opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT i.id, $11::text, 1, 'running', i.fencing_token, $12::text, statement_timestamp()
        FROM inserted i
      RETURNING run_id, attempt
    )
    SELECT i.id, i.workflow_name, i.workflow_version, i.input, i.current_step, i.fencing_token,
           COALESCE(i.deadline_at <= statement_timestamp(), false) AS overdue, o.attempt,
           0 AS prior_failures, 0 AS crashes, false AS repeated_crash, false AS took_over, i.trace_context,
           NULL::jsonb AS outputs
      FROM inserted i
      JOIN opened o ON o.run_id = i.id;
