-- pruneArchiveBatchStatement: up to 1 000 tombstones of runs finished over 400 days ago deleted
--
-- $1 = 34560000000
-- $2 = 1000

    WITH expired AS (
      SELECT a.id FROM ledgerflow.run_archive a
       WHERE a.finished_at < statement_timestamp() - ($1::double precision * interval '1 millisecond')
       ORDER BY a.finished_at, a.id
       LIMIT $2
         FOR UPDATE OF a SKIP LOCKED
    ),
    deleted AS (
      DELETE FROM ledgerflow.run_archive a USING expired x WHERE a.id = x.id
      RETURNING 1
    )
    SELECT count(*)::int AS runs FROM deleted;
