import pg from 'pg';

export interface ServerCounters {
  readonly commits: number;
  readonly rollbacks: number;
}

/**
 * `pg_stat_database` counters of one database, read from another (so the reading does not
 * count). Backends report their counters when they exit at the latest, so this first waits
 * until the database has no sessions left: call it after closing every pool on it.
 */
export async function readServerCounters(adminUrl: string, database: string): Promise<ServerCounters> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    for (let i = 0; ; i++) {
      const { rows } = await client.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
        [database],
      );
      if ((rows[0]?.n ?? 0) === 0) break;
      if (i > 200)
        throw new Error(`sessions on ${database} did not end within 10 s; close every pool before reading counters`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await client.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ commits: string; rollbacks: string }>(
      'SELECT xact_commit::text AS commits, xact_rollback::text AS rollbacks FROM pg_stat_database WHERE datname = $1',
      [database],
    );
    return { commits: Number(rows[0]?.commits ?? 0), rollbacks: Number(rows[0]?.rollbacks ?? 0) };
  } finally {
    await client.end();
  }
}

/**
 * Times the server synced WAL to disk (`pg_stat_wal.wal_sync`), cluster-wide: the durable
 * cost of commits that wrote something (read-only transactions count as commits but sync
 * nothing). Only meaningful around work that runs alone on the server; read it, like
 * `readServerCounters`, after the work's sessions have ended.
 */
export async function readWalSyncs(adminUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ syncs: string }>('SELECT wal_sync::text AS syncs FROM pg_stat_wal');
    return Number(rows[0]?.syncs ?? 0);
  } finally {
    await client.end();
  }
}

/**
 * Puts the server in the same state before every measurement of a comparison: a CHECKPOINT (the
 * previous measurement's dirty pages written out now, not by the checkpointer during the next
 * one), then a wait, up to `timeoutMs`, for autovacuum workers to finish with the databases the
 * previous measurement filled. Measured on bench:peers without it: ledgerflow right after DBOS
 * Transact (18 commits a workflow) ran 0.70–0.75× what it ran right after itself.
 * Returns how long it waited for autovacuum (ms).
 */
export async function settleServer(adminUrl: string, timeoutMs = 30_000): Promise<number> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query('CHECKPOINT');
    const started = Date.now();
    for (;;) {
      const { rows } = await client.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'",
      );
      if ((rows[0]?.n ?? 0) === 0 || Date.now() - started > timeoutMs) return Date.now() - started;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await client.end();
  }
}
