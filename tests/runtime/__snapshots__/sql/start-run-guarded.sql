-- insertRunStatement: a start with a dedupe key, guarded against the archived identity of a pruned run, with a deadline
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "order-payment"
-- $3 = 1
-- $4 = "{\"orderId\":\"order-42\"}"
-- $5 = "order-42"
-- $6 = 600000
-- $7 = "00000000-0000-4000-8000-000000000001"
-- $8 = "order-payment"
-- $9 = "order-42"
-- $10 = "ledgerflow_runs"

/* ledgerflow:prepared */ 
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run ("id", "workflow_name", "workflow_version", "input", "dedupe_key", "deadline_at")
      SELECT $1::uuid, $2::text, $3::integer, $4::jsonb, $5::text, statement_timestamp() + ($6::double precision * interval '1 millisecond')
      WHERE ledgerflow.pruned_run($7::uuid, $8::text, $9::text) IS NULL
      ON CONFLICT DO NOTHING
      RETURNING id
    )
    SELECT inserted.id, pg_notify($10, inserted.id::text) AS notified FROM inserted;
