-- databaseGaugesStatement: the gauges a metric collection reads — waiters per queue, open intents, the oldest open intent
-- (no parameters)

    SELECT (SELECT jsonb_agg(jsonb_build_object('queue', q.name, 'waiting', COALESCE(w.waiting, 0)) ORDER BY q.name)
              FROM ledgerflow.queue q
              LEFT JOIN (SELECT p.queue, sum(p.waiting)::int AS waiting
                           FROM ledgerflow.queue_partition p
                          WHERE p.waiting > 0 AND p.partition <> ''
                          GROUP BY p.queue) w ON w.queue = q.name) AS queues,
           e.open_intents, e.oldest_age
      FROM (SELECT count(*)::int AS open_intents,
                   EXTRACT(EPOCH FROM statement_timestamp() - min(intent_at))::float8 AS oldest_age
              FROM ledgerflow.step_effect
             WHERE status = 'intent') e;
