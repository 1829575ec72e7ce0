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
      const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [database]);
      if ((rows[0]?.n ?? 0) === 0) break;
      if (i > 200) throw new Error(`sessions on ${database} did not end within 10 s; close every pool before reading counters`);
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
