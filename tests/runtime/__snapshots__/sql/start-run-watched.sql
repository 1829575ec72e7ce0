-- insertRunStatement: a start by startAndWait, its run marked as waited for (its settle NOTIFYs, core 0011)
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "order-payment"
-- $3 = 1
-- $4 = "{\"orderId\":\"order-42\"}"
-- $5 = null
-- $6 = true
-- $7 = "ledgerflow_runs"

/* ledgerflow:prepared */ 
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run ("id", "workflow_name", "workflow_version", "input", "dedupe_key", "notify_settled")
      SELECT $1::uuid, $2::text, $3::integer, $4::jsonb, $5::text, $6::boolean
      
      ON CONFLICT DO NOTHING
      RETURNING id
    )
    SELECT inserted.id, pg_notify($7, inserted.id::text) AS notified FROM inserted;
