-- acquireSlotStatement: ask for a slot (granted now, or a place in line)
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = 7
-- $3 = "email"
-- $4 = "customer-7"
-- $5 = "receipt"

/* ledgerflow:prepared */ 
    WITH owner AS MATERIALIZED (
      SELECT r.id, r.priority FROM ledgerflow.workflow_run r
       WHERE r.id = $1::uuid AND r.fencing_token = $2 AND r.status = 'running'
         FOR NO KEY UPDATE
    )
    SELECT ledgerflow.queue_acquire($3, $4, owner.id, $5, owner.priority) AS retry_at FROM owner;
