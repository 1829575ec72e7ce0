-- pruneEventsBatchStatement: up to 1 000 events consumed over 7 days ago deleted, those with a dedupe key archived
--
-- $1 = 604800000
-- $2 = 1000

    WITH victims AS (
      SELECT e.id FROM ledgerflow.event e
       WHERE e.consumed_at < statement_timestamp() - ($1::double precision * interval '1 millisecond')
       ORDER BY e.consumed_at, e.id
       LIMIT $2
         FOR UPDATE OF e SKIP LOCKED
    ),
    archived AS (
      INSERT INTO ledgerflow.event_archive
             (name, dedupe_key, id, correlation_key, payload_hash, created_at, consumed_by_run, consumed_by_step, consumed_at)
      SELECT e.name, e.dedupe_key, e.id, e.correlation_key, encode(sha256(convert_to(e.payload::text, 'UTF8')), 'hex'), e.created_at,
             e.consumed_by_run, e.consumed_by_step, e.consumed_at
        FROM ledgerflow.event e JOIN victims v ON v.id = e.id
       WHERE e.dedupe_key IS NOT NULL
      ON CONFLICT DO NOTHING
      RETURNING 1
    ),
    deleted AS (
      DELETE FROM ledgerflow.event e USING victims v WHERE e.id = v.id
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM deleted)::int AS events, (SELECT count(*) FROM archived)::int AS archived;
