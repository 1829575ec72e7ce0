-- takeEventStatement: the oldest untaken event, consumed once by this step
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = "settled"
-- $3 = "payment.settled"
-- $4 = "order-42"
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = 7

    UPDATE ledgerflow.event
       SET consumed_by_run = $1, consumed_by_step = $2, consumed_at = statement_timestamp()
     WHERE id = (SELECT e.id FROM ledgerflow.event e
                  WHERE e.name = $3 AND e.correlation_key = $4 AND e.consumed_at IS NULL
                  ORDER BY e.created_at, e.id
                  LIMIT 1
                    FOR UPDATE)
       AND consumed_at IS NULL AND EXISTS (SELECT 1 FROM ledgerflow.workflow_run r
               WHERE r.id = $5 AND r.fencing_token = $6 AND r.status = 'running')
    RETURNING id, payload, created_at;
