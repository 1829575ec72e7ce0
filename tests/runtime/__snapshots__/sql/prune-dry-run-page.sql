-- prunableRunsStatement: a dry run's next page of runs a pass would prune, after the last one seen
--
-- $1 = ["completed","failed","cancelled"]
-- $2 = 2592000000
-- $3 = ["completed","failed","cancelled"]
-- $4 = 2592000000
-- $5 = "2030-01-02 03:04:05.123456+00"
-- $6 = "00000000-0000-4000-8000-000000000002"
-- $7 = 1000

    SELECT r.id, r.finished_at::text AS finished_at,
           (SELECT count(*) FROM ledgerflow.step_effect e WHERE e.workflow_id = r.id AND e.status = 'recorded')::int AS effects
      FROM ledgerflow.workflow_run r
     WHERE r.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND r.status = ANY($1::text[])
         AND r.finished_at < statement_timestamp() - ($2::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = r.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p
                          WHERE p.id = r.parent_run_id AND p.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed'))
       AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run c
                        WHERE c.parent_run_id = r.id AND (c.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND c.status = ANY($3::text[])
         AND c.finished_at < statement_timestamp() - ($4::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = c.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p
                          WHERE p.id = c.parent_run_id AND p.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed'))) IS NOT TRUE)
       AND (r.finished_at, r.id) > ($5::timestamptz, $6::uuid)
     ORDER BY r.finished_at, r.id
     LIMIT $7;
