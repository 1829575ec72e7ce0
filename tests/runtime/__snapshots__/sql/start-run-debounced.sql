-- insertRunStatement: a debounced start opening its window (no archive guard, no NOTIFY: not due yet)
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "digest"
-- $3 = 2
-- $4 = "{\"customerId\":\"c-7\"}"
-- $5 = null
-- $6 = 5
-- $7 = "digest:c-7"
-- $8 = true
-- $9 = 60000
-- $10 = 60000
-- $11 = 600000

/* ledgerflow:prepared */ 
    WITH inserted AS (
      INSERT INTO ledgerflow.workflow_run ("id", "workflow_name", "workflow_version", "input", "dedupe_key", "priority", "debounce_key", "debounce_open", "created_at", "run_after", "deadline_at")
      SELECT $1::uuid, $2::text, $3::integer, $4::jsonb, $5::text, $6::integer, $7::text, $8::boolean, statement_timestamp(), statement_timestamp() + ($9::double precision * interval '1 millisecond'), statement_timestamp() + ($10::double precision * interval '1 millisecond') + ($11::double precision * interval '1 millisecond')
      
      ON CONFLICT DO NOTHING
      RETURNING id
    )
    SELECT inserted.id, NULL AS notified FROM inserted;
