-- openTransactionalEffectStatement: first statement of a transactional step's transaction
--
-- $1 = "00000000-0000-4000-8000-000000000001"
-- $2 = 7
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = "debit"
-- $5 = "debit"
-- $6 = "order-42-debit"
-- $7 = "sha256:5f1c"
-- $8 = 2
-- $9 = 7

/* ledgerflow:prepared */ 
    WITH fence AS (
      SELECT id FROM ledgerflow.workflow_run
       WHERE id = $1 AND fencing_token = $2 AND status = 'running'
    ), 
    existing AS (
      SELECT idempotency_key, status, kind, request_hash, effect, attempt, fencing_token, intent_at
        FROM ledgerflow.step_effect WHERE workflow_id = $3 AND step_name = $4
    ),
    inserted AS (
      INSERT INTO ledgerflow.step_effect
             (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
      SELECT id, $5, $6, 'null'::jsonb, 'recorded', 'transactional', $7,
             $8, $9, statement_timestamp()
        FROM fence
       WHERE NOT EXISTS (SELECT 1 FROM existing)
      ON CONFLICT DO NOTHING
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fence) AS fenced,
           EXISTS (SELECT 1 FROM inserted) AS inserted,
           (SELECT json_agg(e) FROM existing e) AS existing,
           pg_backend_pid() AS pid;
