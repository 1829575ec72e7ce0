-- openWaitStatement: a waitFor records its event, key and timeout once
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "settled"
-- $3 = "event"
-- $4 = 86400000
-- $5 = "payment.settled"
-- $6 = "order-42"
-- $7 = "00000000-0000-4000-8000-000000000001"
-- $8 = 7
-- $9 = "00000000-0000-4000-8000-000000000001"
-- $10 = "settled"
-- $11 = "00000000-0000-4000-8000-000000000001"
-- $12 = 7

    WITH opened AS (
      INSERT INTO ledgerflow.step_wait (run_id, step_name, kind, until, event_name, correlation_key, created_at)
      SELECT $1, $2, $3, statement_timestamp() + ($4::double precision * interval '1 millisecond'), $5::text, $6::text, statement_timestamp()
       WHERE EXISTS (SELECT 1 FROM ledgerflow.workflow_run r
               WHERE r.id = $7 AND r.fencing_token = $8 AND r.status = 'running')
      ON CONFLICT (run_id, step_name) DO NOTHING
      RETURNING until
    ),
    wait AS (
      SELECT until FROM opened
      UNION ALL
      SELECT w.until FROM ledgerflow.step_wait w
       WHERE w.run_id = $9 AND w.step_name = $10 AND NOT EXISTS (SELECT 1 FROM opened)
    )
    SELECT EXISTS (SELECT 1 FROM ledgerflow.workflow_run r
               WHERE r.id = $11 AND r.fencing_token = $12 AND r.status = 'running') AS fenced, w.until, w.until <= statement_timestamp() AS due
      FROM (SELECT 1) one LEFT JOIN wait w ON true;
