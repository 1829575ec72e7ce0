import { cpus, totalmem, release, platform } from 'node:os';
import pg from 'pg';
import { startPostgres, type PostgresServer } from '../tests/support/postgres-server.js';

/** Where the numbers were measured; printed above every results table. */
export interface BenchEnvironment {
  readonly date: string;
  readonly node: string;
  readonly os: string;
  readonly cpu: string;
  readonly cpuCount: number;
  readonly memoryGiB: number;
  readonly serverVersion: string;
  readonly synchronousCommit: string;
  readonly fsync: string;
  readonly fullPageWrites: string;
  readonly walSyncMethod: string;
  readonly sharedBuffers: string;
  /** `started by the bench` or `DATABASE_URL`. */
  readonly serverOrigin: string;
}

/** A PostgreSQL server for the whole bench run, with a fresh database per workload. */
export interface BenchServer {
  /** Creates (or recreates) a database and returns its URL. */
  freshDatabase(name: string): Promise<string>;
  /** Superuser URL of a database the workloads never touch, for reading statistics. */
  readonly adminUrl: string;
  readonly origin: string;
  close(): Promise<void>;
}

/**
 * Durable settings, spelled out so that a changed server default cannot quietly turn the
 * benchmark into an fsync-off one.
 */
const DURABLE_SETTINGS = {
  fsync: 'on',
  synchronous_commit: 'on',
  full_page_writes: 'on',
  max_connections: '300',
} as const;

/** Starts a throwaway durable server, or uses `DATABASE_URL` (whose settings are recorded, not changed). */
export async function openBenchServer(): Promise<BenchServer> {
  const given = process.env['DATABASE_URL'];
  let server: PostgresServer | undefined;
  let baseUrl: string;
  if (given) {
    baseUrl = given;
  } else {
    server = await startPostgres({ settings: DURABLE_SETTINGS });
    baseUrl = server.url;
  }
  const urlFor = (database: string): string => {
    const url = new URL(baseUrl);
    url.pathname = `/${database}`;
    return url.toString();
  };
  return {
    adminUrl: baseUrl,
    origin: server ? 'started by the bench (tests/support/postgres-server.ts)' : 'DATABASE_URL',
    async freshDatabase(name) {
      const admin = new pg.Client({ connectionString: baseUrl });
      await admin.connect();
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
        await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      } finally {
        await admin.end();
      }
      return urlFor(name);
    },
    async close() {
      await server?.destroy();
    },
  };
}

export async function describeEnvironment(server: BenchServer): Promise<BenchEnvironment> {
  const client = new pg.Client({ connectionString: server.adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query<Record<string, string>>(
      `SELECT current_setting('server_version') AS server_version,
              current_setting('synchronous_commit') AS synchronous_commit,
              current_setting('fsync') AS fsync,
              current_setting('full_page_writes') AS full_page_writes,
              current_setting('wal_sync_method') AS wal_sync_method,
              current_setting('shared_buffers') AS shared_buffers`,
    );
    const row = rows[0] ?? {};
    const cpuList = cpus();
    return {
      date: new Date().toISOString(),
      node: process.version,
      os: `${platform()} ${release()}`,
      cpu: cpuList[0]?.model.trim() ?? 'unknown',
      cpuCount: cpuList.length,
      memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
      serverVersion: `PostgreSQL ${row['server_version'] ?? '?'}`,
      synchronousCommit: row['synchronous_commit'] ?? '?',
      fsync: row['fsync'] ?? '?',
      fullPageWrites: row['full_page_writes'] ?? '?',
      walSyncMethod: row['wal_sync_method'] ?? '?',
      sharedBuffers: row['shared_buffers'] ?? '?',
      serverOrigin: server.origin,
    };
  } finally {
    await client.end();
  }
}
