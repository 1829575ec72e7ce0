-- pruneBatchStatement: up to 1 000 runs finished over 30 days ago archived and deleted (completed and cancelled only)
--
-- $1 = ["completed","cancelled"]
-- $2 = 2592000000
-- $3 = ["completed","cancelled"]
-- $4 = 2592000000
-- $5 = ["completed","cancelled"]
-- $6 = 2592000000
-- $7 = ["completed","cancelled"]
-- $8 = 2592000000
-- $9 = 1000

    WITH victims AS (
      SELECT r.id FROM ledgerflow.workflow_run r
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
         AND NOT EXISTS (SELECT 1 FROM ledgerflow.workflow_run c WHERE c.parent_run_id = r.id)
       ORDER BY r.finished_at, r.id
       LIMIT $9
         FOR UPDATE OF r SKIP LOCKED
    ),
    archived AS (
      INSERT INTO ledgerflow.run_archive
             (id, workflow_name, workflow_version, dedupe_key, input_hash, status, parent_run_id, created_at, finished_at)
      SELECT r.id, r.workflow_name, r.workflow_version, r.dedupe_key, encode(sha256(convert_to(r.input::text, 'UTF8')), 'hex'), r.status, r.parent_run_id,
             r.created_at, r.finished_at
        FROM ledgerflow.workflow_run r JOIN victims v ON v.id = r.id
      ON CONFLICT DO NOTHING
      RETURNING id
    ),
    effects AS (
      INSERT INTO ledgerflow.effect_archive
             (run_id, step_name, idempotency_key, kind, effect, request_hash, resolution, recorded_at)
      SELECT e.workflow_id, e.step_name, e.idempotency_key, e.kind, e.effect, e.request_hash, e.resolution, e.recorded_at
        FROM ledgerflow.step_effect e JOIN archived a ON a.id = e.workflow_id
       WHERE e.status = 'recorded'
      RETURNING 1
    ),
    deleted AS (
      DELETE FROM ledgerflow.workflow_run r USING victims v WHERE r.id = v.id
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM deleted)::int AS runs, (SELECT count(*) FROM archived)::int AS archived,
           (SELECT count(*) FROM effects)::int AS effects;
