-- openIntentStatement: the intent commit of an external step (provider does not dedupe)
--
-- $1 = 30000
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = 7
-- $4 = 2
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = "charge"
-- $7 = "charge"
-- $8 = "order-42-charge"
-- $9 = "sha256:5f1c"
-- $10 = 2
-- $11 = 7
-- $12 = 60000
-- $13 = 2
-- $14 = 7
-- $15 = 60000
-- $16 = 2
-- $17 = "00000000-0000-4000-8000-000000000001"
-- $18 = "charge"
-- $19 = "order-42-charge"
-- $20 = "sha256:5f1c"
-- $21 = false
-- $22 = "order-42-charge"

/* ledgerflow:prepared */ 
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run SET lease_expires_at = statement_timestamp() + ($1::double precision * interval '1 millisecond'), updated_at = statement_timestamp()
       WHERE id = $2 AND fencing_token = $3 AND status = 'running'
         AND current_step = $4
      RETURNING id
    ),
    existing AS (
      SELECT idempotency_key, status, kind, request_hash, effect, attempt, fencing_token, intent_at, reconcile_after, reconcile_attempts
        FROM ledgerflow.step_effect WHERE workflow_id = $5 AND step_name = $6
    ),
    inserted AS (
      INSERT INTO ledgerflow.step_effect
             (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token,
              intent_at, reconcile_after)
      SELECT id, $7, $8, 'null'::jsonb, 'intent', 'external', $9,
             $10, $11, statement_timestamp(), statement_timestamp() + ($12::double precision * interval '1 millisecond')
        FROM fenced
       WHERE NOT EXISTS (SELECT 1 FROM existing)
      ON CONFLICT DO NOTHING
      RETURNING 1
    ),
    retaken AS (
      UPDATE ledgerflow.step_effect
         SET status = 'intent', attempt = $13, fencing_token = $14,
             intent_at = statement_timestamp(), reconcile_after = statement_timestamp() + ($15::double precision * interval '1 millisecond'),
             resolution = CASE WHEN status = 'released' THEN resolution || '; taken again by attempt ' || $16::text
                               ELSE resolution END
       WHERE workflow_id = $17 AND step_name = $18 AND idempotency_key = $19
         AND request_hash = $20
         AND (status = 'released' OR (status = 'intent' AND $21::boolean))
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    ),
    mine AS (
      SELECT * FROM existing WHERE idempotency_key = $22
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           EXISTS (SELECT 1 FROM inserted) AS inserted,
           EXISTS (SELECT 1 FROM retaken) AS retaken,
           (SELECT json_agg(e) FROM existing e) AS existing,
           (SELECT m.reconcile_after <= statement_timestamp() FROM mine m) AS due,
           (SELECT m.reconcile_after FROM mine m) AS due_at;
