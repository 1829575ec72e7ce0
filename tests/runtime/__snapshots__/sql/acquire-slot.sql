-- acquireSlotStatement: ask for a slot (granted now, or a place in line)
--
-- $1 = "email"
-- $2 = "customer-7"
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = "receipt"
-- $5 = "00000000-0000-4000-8000-000000000001"

    SELECT ledgerflow.queue_acquire($1, $2, $3::uuid, $4,
                                    (SELECT r.priority FROM ledgerflow.workflow_run r WHERE r.id = $5::uuid)) AS retry_at;
