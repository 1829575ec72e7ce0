-- renewLeasesStatement: the heartbeat over two held runs
--
-- $1 = ["00000000-0000-4000-8000-000000000001","00000000-0000-4000-8000-000000000002"]
-- $2 = [7,3]
-- $3 = 30000

/* ledgerflow:prepared */ 
    WITH mine AS (
      SELECT * FROM unnest($1::uuid[], $2::bigint[])
        AS m(id, fencing_token)
    ),
    lockable AS (
      SELECT r.id FROM ledgerflow.workflow_run r JOIN mine m USING (id, fencing_token)
       WHERE r.status = 'running'
         FOR NO KEY UPDATE OF r SKIP LOCKED
    ),
    renewed AS (
      UPDATE ledgerflow.workflow_run r SET lease_expires_at = statement_timestamp() + ($3::double precision * interval '1 millisecond')
        FROM lockable l WHERE r.id = l.id
      RETURNING r.id
    )
    SELECT m.id, m.fencing_token, (r.id IS NULL OR r.fencing_token <> m.fencing_token OR r.status <> 'running') AS lost
      FROM mine m LEFT JOIN ledgerflow.workflow_run r ON r.id = m.id;
