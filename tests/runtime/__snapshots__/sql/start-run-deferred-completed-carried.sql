-- insertRunStatement with a completion after carried plain steps: their results and attempts inserted with the run, dated by the worker's measures
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "order-payment"
-- $3 = 1
-- $4 = "{\"orderId\":\"order-42\"}"
-- $5 = 2
-- $6 = "{\"load\":{\"units\":2},\"total\":{\"cents\":200}}"
-- $7 = 12.5
-- $8 = "[{\"step_name\":\"load\",\"kind\":\"step\",\"output\":\"{\\\"units\\\":2}\",\"skipped\":false,\"attempt\":1,\"started_ago\":11.5,\"finished_ago\":6.25,\"first\":true,\"rank\":1}]"
-- $9 = "worker-a"
-- $10 = "total"
-- $11 = "step"
-- $12 = "{\"cents\":200}"
-- $13 = 1
-- $14 = "total"
-- $15 = 1
-- $16 = "worker-a"
-- $17 = 6.248

/* ledgerflow:prepared */ 
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run ("id", "workflow_name", "workflow_version", "input", status, current_step, fencing_token, output, updated_at, finished_at, created_at)
      SELECT $1::uuid, $2::text, $3::integer, $4::jsonb, 'completed', $5::int, 1, $6::jsonb, statement_timestamp(), statement_timestamp(), statement_timestamp() - ($7::double precision * interval '1 millisecond')
      
      ON CONFLICT DO NOTHING
      RETURNING id, workflow_name, workflow_version, fencing_token
    ),
    carried AS (
      SELECT * FROM jsonb_to_recordset($8::jsonb) AS c(
        step_name text, kind text, output text, skipped boolean, attempt int, started_ago double precision,
        finished_ago double precision, first boolean, rank int)
    ),
    carried_result AS (
      -- Dated when each step ended, and before the carrying step's result (now(): its transaction's start).
      INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, skipped, created_at)
      SELECT f.id, f.workflow_name, f.workflow_version, c.step_name, c.kind, c.output::jsonb, c.attempt, c.skipped,
             LEAST(statement_timestamp() - c.finished_ago * interval '1 millisecond', now()) - c.rank * interval '2 microseconds'
        FROM inserted f, carried c
      RETURNING 1
    ),
    carried_attempt AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT f.id, c.step_name, c.attempt, 'succeeded', f.fencing_token, $9::text,
             statement_timestamp() - c.started_ago * interval '1 millisecond',
             statement_timestamp() - c.finished_ago * interval '1 millisecond'
        FROM inserted f, carried c
      RETURNING 1
    ),
    result AS (
      INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, skipped)
      SELECT i.id, i.workflow_name, i.workflow_version, $10::text, $11::text, $12::jsonb, $13::int, false
        FROM inserted i
      RETURNING 1
    ),
    finished AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT i.id, $14::text, $15::int, 'succeeded', i.fencing_token, $16::text, statement_timestamp() - ($17::double precision * interval '1 millisecond'), statement_timestamp()
        FROM inserted i
      RETURNING 1
    )
    SELECT i.id FROM inserted i;
