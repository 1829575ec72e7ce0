-- sendEventStatement: store the event (idempotent by dedupe key) and wake the runs waiting for it
--
-- $1 = "ffffffff-0000-4000-8000-000000000009"
-- $2 = "payment.settled"
-- $3 = "order-42"
-- $4 = "{\"orderId\":\"order-42\",\"paid\":true}"
-- $5 = "psp-981"
-- $6 = "payment.settled"
-- $7 = "order-42"
-- $8 = "ledgerflow_runs"
-- $9 = "order-42"
-- $10 = "{\"orderId\":\"order-42\",\"paid\":true}"
-- $11 = "payment.settled"
-- $12 = "psp-981"

    WITH inserted AS (
      INSERT INTO ledgerflow.event (id, name, correlation_key, payload, dedupe_key, created_at)
      VALUES ($1, $2, $3, $4::jsonb, $5::text, statement_timestamp())
      ON CONFLICT (name, dedupe_key) DO NOTHING
      RETURNING id
    ),
    woken AS (
      UPDATE ledgerflow.workflow_run r
         SET run_after = statement_timestamp(), updated_at = statement_timestamp()
        FROM ledgerflow.step_wait w
       WHERE EXISTS (SELECT 1 FROM inserted)
         AND w.kind = 'event' AND w.event_name = $6 AND w.correlation_key = $7 AND w.resolved_at IS NULL
         AND r.id = w.run_id AND r.status = 'waiting'
      RETURNING r.id, pg_notify($8, r.id::text)
    )
    SELECT i.id, true AS created, true AS same, (SELECT count(*) FROM woken) AS woke FROM inserted i
    UNION ALL
    SELECT e.id, false, e.correlation_key = $9 AND e.payload = $10::jsonb, 0
      FROM ledgerflow.event e
     WHERE NOT EXISTS (SELECT 1 FROM inserted) AND e.name = $11 AND e.dedupe_key = $12::text;
