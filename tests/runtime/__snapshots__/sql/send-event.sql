-- sendEventStatement: store the event (idempotent by dedupe key) and wake the runs waiting for it
--
-- $1 = "payment.settled"
-- $2 = "psp-981"
-- $3 = "ffffffff-0000-4000-8000-000000000009"
-- $4 = "payment.settled"
-- $5 = "order-42"
-- $6 = "{\"orderId\":\"order-42\",\"paid\":true}"
-- $7 = "psp-981"
-- $8 = "payment.settled"
-- $9 = "order-42"
-- $10 = "ledgerflow_runs"
-- $11 = "order-42"
-- $12 = "{\"orderId\":\"order-42\",\"paid\":true}"
-- $13 = "payment.settled"
-- $14 = "psp-981"
-- $15 = "order-42"
-- $16 = "{\"orderId\":\"order-42\",\"paid\":true}"

    WITH pruned AS (
      SELECT p.id, p.correlation_key, p.payload_hash FROM ledgerflow.pruned_event($1, $2::text) p
    ),
    inserted AS (
      INSERT INTO ledgerflow.event (id, name, correlation_key, payload, dedupe_key, created_at)
      SELECT $3, $4, $5, $6::jsonb, $7::text, statement_timestamp()
       WHERE NOT EXISTS (SELECT 1 FROM pruned)
      ON CONFLICT (name, dedupe_key) DO NOTHING
      RETURNING id
    ),
    
woken AS (
      UPDATE ledgerflow.workflow_run r
         SET run_after = statement_timestamp(), updated_at = statement_timestamp()
        FROM ledgerflow.step_wait w
       WHERE EXISTS (SELECT 1 FROM inserted)
         AND w.kind = 'event' AND w.event_name = $8 AND w.correlation_key = $9 AND w.resolved_at IS NULL
         AND r.id = w.run_id AND r.status = 'waiting'
      RETURNING r.id, pg_notify($10, r.id::text)
    )
    SELECT i.id, true AS created, true AS same, (SELECT count(*) FROM woken) AS woke FROM inserted i
    UNION ALL
    SELECT e.id, false, e.correlation_key = $11 AND e.payload = $12::jsonb, 0
      FROM ledgerflow.event e
     WHERE NOT EXISTS (SELECT 1 FROM inserted) AND NOT EXISTS (SELECT 1 FROM pruned) AND e.name = $13 AND e.dedupe_key = $14::text
    UNION ALL
    SELECT p.id, false, p.correlation_key = $15 AND p.payload_hash = encode(sha256(convert_to($16::jsonb::text, 'UTF8')), 'hex'), 0
      FROM pruned p;
