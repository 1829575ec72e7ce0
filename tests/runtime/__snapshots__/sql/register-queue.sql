-- registerQueueStatement: a queue and its limits, as the worker declares them
--
-- $1 = "email"
-- $2 = 4
-- $3 = 10
-- $4 = 1000
-- $5 = 1
-- $6 = null
-- $7 = null

    WITH q AS (
      INSERT INTO ledgerflow.queue (name, concurrency, rate_limit, rate_period_ms, partition_concurrency, partition_rate_limit,
                                    partition_rate_period_ms, updated_at)
      VALUES ($1, $2::int, $3::int, $4::int,
              $5::int, $6::int,
              $7::int, statement_timestamp())
      ON CONFLICT (name) DO UPDATE
         SET concurrency = EXCLUDED.concurrency, rate_limit = EXCLUDED.rate_limit, rate_period_ms = EXCLUDED.rate_period_ms,
             partition_concurrency = EXCLUDED.partition_concurrency, partition_rate_limit = EXCLUDED.partition_rate_limit,
             partition_rate_period_ms = EXCLUDED.partition_rate_period_ms, updated_at = EXCLUDED.updated_at
      RETURNING name
    )
    INSERT INTO ledgerflow.queue_partition (queue, partition) SELECT name, '' FROM q ON CONFLICT DO NOTHING;
