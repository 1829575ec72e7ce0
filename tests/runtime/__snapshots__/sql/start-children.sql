-- startChildrenStatement: a batch of children, none twice, counted on the parent
--
-- $1 = [0,1]
-- $2 = ["00000000-0000-4000-8000-000000000002","00000000-0000-4000-8000-000000000003"]
-- $3 = ["job-1:0","job-1:100"]
-- $4 = ["{\"from\":0,\"to\":100}","{\"from\":100,\"to\":200}"]
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = "copy"
-- $7 = 30000
-- $8 = "00000000-0000-4000-8000-000000000001"
-- $9 = 7
-- $10 = "copy-batch"
-- $11 = 1
-- $12 = "00000000-0000-4000-8000-000000000001"
-- $13 = "copy"
-- $14 = "{\"traceparent\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}"
-- $15 = "ledgerflow_runs"
-- $16 = "00000000-0000-4000-8000-000000000001"

    WITH items AS (
      SELECT * FROM unnest($1::int[], $2::uuid[], $3::text[], $4::jsonb[]) AS i(idx, id, key, input)
    ),
    fresh AS (
      SELECT i.* FROM items i
       WHERE NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run c
                          WHERE c.parent_run_id = $5 AND c.parent_step = $6 AND c.parent_index = i.idx)
    ),
    fenced AS (
      UPDATE ledgerflow.workflow_run
         SET children_open = children_open + (SELECT count(*) FROM fresh),
             lease_expires_at = statement_timestamp() + ($7::double precision * interval '1 millisecond'), updated_at = statement_timestamp()
       WHERE id = $8 AND fencing_token = $9 AND status = 'running'
      RETURNING id, trace_context
    ),
    inserted AS (
      INSERT INTO ledgerflow.workflow_run
             (id, workflow_name, workflow_version, input, dedupe_key, parent_run_id, parent_step, parent_index, deadline_at, trace_context)
      SELECT f.id, $10, $11, f.input, f.key, $12, $13, f.idx, NULL::timestamptz,
             COALESCE($14::jsonb, p.trace_context)
        FROM fresh f, fenced p
      ON CONFLICT (parent_run_id, parent_step, parent_index) DO NOTHING
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, (SELECT count(*) FROM inserted) AS started,
           (SELECT pg_notify($15, $16::text) WHERE EXISTS (SELECT 1 FROM inserted)) AS notified;
