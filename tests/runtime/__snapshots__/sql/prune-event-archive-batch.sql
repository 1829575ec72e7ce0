-- pruneEventArchiveBatchStatement: up to 1 000 tombstones of events sent over 400 days ago deleted
--
-- $1 = 34560000000
-- $2 = 1000

    WITH expired AS (
      SELECT a.name, a.dedupe_key FROM ledgerflow.event_archive a
       WHERE a.created_at < statement_timestamp() - ($1::double precision * interval '1 millisecond')
       ORDER BY a.created_at, a.name, a.dedupe_key
       LIMIT $2
         FOR UPDATE OF a SKIP LOCKED
    ),
    deleted AS (
      DELETE FROM ledgerflow.event_archive a USING expired x WHERE a.name = x.name AND a.dedupe_key = x.dedupe_key
      RETURNING 1
    )
    SELECT count(*)::int AS events FROM deleted;
