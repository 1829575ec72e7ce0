-- insertRunStatement with claimedBy, startedMsAgo and completion: a start handed to its worker uninserted whose first commit completes it — the run inserted completed with its step's result and attempt, one statement
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "order-payment"
-- $3 = 1
-- $4 = "{\"orderId\":\"order-42\"}"
-- $5 = 1
-- $6 = "{\"load\":{\"units\":2}}"
-- $7 = 12.5
-- $8 = "load"
-- $9 = "step"
-- $10 = "{\"units\":2}"
-- $11 = 1
-- $12 = "load"
-- $13 = 1
-- $14 = "worker-a"
-- $15 = 12.5

/* ledgerflow:prepared */ 
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run ("id", "workflow_name", "workflow_version", "input", status, current_step, fencing_token, output, updated_at, finished_at, created_at)
      SELECT $1::uuid, $2::text, $3::integer, $4::jsonb, 'completed', $5::int, 1, $6::jsonb, statement_timestamp(), statement_timestamp(), statement_timestamp() - ($7::double precision * interval '1 millisecond')
      
      ON CONFLICT DO NOTHING
      RETURNING id, workflow_name, workflow_version, fencing_token
    ),
    result AS (
      INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, skipped)
      SELECT i.id, i.workflow_name, i.workflow_version, $8::text, $9::text, $10::jsonb, $11::int, false
        FROM inserted i
      RETURNING 1
    ),
    finished AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT i.id, $12::text, $13::int, 'succeeded', i.fencing_token, $14::text, statement_timestamp() - ($15::double precision * interval '1 millisecond'), statement_timestamp()
        FROM inserted i
      RETURNING 1
    )
    SELECT i.id FROM inserted i;
