-- insertRunStatement with claimedBy and startedMsAgo: the insert of a start handed to its worker uninserted, made by the run's first commit — creation and first attempt back-dated to the hand-over
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "order-payment"
-- $3 = 1
-- $4 = "{\"orderId\":\"order-42\"}"
-- $5 = "worker-a"
-- $6 = 30000
-- $7 = 12.5
-- $8 = "reserve"
-- $9 = "worker-a"
-- $10 = 12.5

/* ledgerflow:prepared */ 
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run ("id", "workflow_name", "workflow_version", "input", status, lease_owner, lease_expires_at, fencing_token, updated_at, created_at)
      SELECT $1::uuid, $2::text, $3::integer, $4::jsonb, 'running', $5::text, statement_timestamp() + ($6::double precision * interval '1 millisecond'), 1, statement_timestamp(), statement_timestamp() - ($7::double precision * interval '1 millisecond')
      
      ON CONFLICT DO NOTHING
      RETURNING id, workflow_name, workflow_version, input, current_step, fencing_token, deadline_at, trace_context
    ),
    opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at)
      SELECT i.id, $8::text, 1, 'running', i.fencing_token, $9::text, statement_timestamp() - ($10::double precision * interval '1 millisecond')
        FROM inserted i
      RETURNING run_id, attempt
    )
    SELECT i.id, i.workflow_name, i.workflow_version, i.input, i.current_step, i.fencing_token,
           COALESCE(i.deadline_at <= statement_timestamp(), false) AS overdue, o.attempt,
           0 AS prior_failures, 0 AS crashes, false AS repeated_crash, false AS took_over, i.trace_context,
           NULL::jsonb AS outputs
      FROM inserted i
      JOIN opened o ON o.run_id = i.id;
