-- prunableRunsStatement: a dry run's next page of runs a pass would prune, after the last one seen
--
-- $1 = ["completed","failed","cancelled"]
-- $2 = 2592000000
-- $3 = ["completed","failed","cancelled"]
-- $4 = 2592000000
-- $5 = ["completed","failed","cancelled"]
-- $6 = 2592000000
-- $7 = ["completed","failed","cancelled"]
-- $8 = 2592000000
-- $9 = ["completed","failed","cancelled"]
-- $10 = 2592000000
-- $11 = ["completed","failed","cancelled"]
-- $12 = 2592000000
-- $13 = ["completed","failed","cancelled"]
-- $14 = 2592000000
-- $15 = ["completed","failed","cancelled"]
-- $16 = 2592000000
-- $17 = "2030-01-02 03:04:05.123456+00"
-- $18 = "00000000-0000-4000-8000-000000000002"
-- $19 = 1000

    SELECT r.id, r.finished_at::text AS finished_at,
           (SELECT count(*) FROM ledgerflow.step_effect e WHERE e.workflow_id = r.id AND e.status = 'recorded')::int AS effects
      FROM ledgerflow.workflow_run r
     WHERE r.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND r.status = ANY($1::text[])
         AND r.finished_at < statement_timestamp() - ($2::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = r.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p3
          WHERE p3.id = r.parent_run_id
            AND (p3.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
                 OR (p3.status IN ('failed', 'cancelled') AND (p3.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND p3.status = ANY($3::text[])
         AND p3.finished_at < statement_timestamp() - ($4::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = p3.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p2
          WHERE p2.id = p3.parent_run_id
            AND (p2.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
                 OR (p2.status IN ('failed', 'cancelled') AND (p2.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND p2.status = ANY($5::text[])
         AND p2.finished_at < statement_timestamp() - ($6::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = p2.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p1
          WHERE p1.id = p2.parent_run_id
            AND (p1.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
                 OR (p1.status IN ('failed', 'cancelled') AND (p1.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND p1.status = ANY($7::text[])
         AND p1.finished_at < statement_timestamp() - ($8::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = p1.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p0
          WHERE p0.id = p1.parent_run_id
            AND (p0.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
                 OR (p0.status IN ('failed', 'cancelled') AND (false) IS NOT TRUE)))) IS NOT TRUE)))) IS NOT TRUE)))) IS NOT TRUE)))
       AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run c
                        WHERE c.parent_run_id = r.id AND (c.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND c.status = ANY($9::text[])
         AND c.finished_at < statement_timestamp() - ($10::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = c.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p3
          WHERE p3.id = c.parent_run_id
            AND (p3.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
                 OR (p3.status IN ('failed', 'cancelled') AND (p3.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND p3.status = ANY($11::text[])
         AND p3.finished_at < statement_timestamp() - ($12::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = p3.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p2
          WHERE p2.id = p3.parent_run_id
            AND (p2.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
                 OR (p2.status IN ('failed', 'cancelled') AND (p2.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND p2.status = ANY($13::text[])
         AND p2.finished_at < statement_timestamp() - ($14::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = p2.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p1
          WHERE p1.id = p2.parent_run_id
            AND (p1.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
                 OR (p1.status IN ('failed', 'cancelled') AND (p1.status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed') AND p1.status = ANY($15::text[])
         AND p1.finished_at < statement_timestamp() - ($16::double precision * interval '1 millisecond')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_effect e WHERE e.workflow_id = p1.id AND e.status = 'intent')
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run p0
          WHERE p0.id = p1.parent_run_id
            AND (p0.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
                 OR (p0.status IN ('failed', 'cancelled') AND (false) IS NOT TRUE)))) IS NOT TRUE)))) IS NOT TRUE)))) IS NOT TRUE)))) IS NOT TRUE)
       AND (r.finished_at, r.id) > ($17::timestamptz, $18::uuid)
     ORDER BY r.finished_at, r.id
     LIMIT $19;
