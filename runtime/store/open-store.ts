import { createPgStore, type PoolerOptions } from './pg/pg-store.js';
import { createPGliteStore } from './pglite/pglite-store.js';
import type { Store } from './store.js';

export type { PoolerOptions };

export const DEFAULT_DATA_DIR = '.ledgerflow/db';

export interface OpenStoreOptions {
  /**
   * PostgreSQL connection string; defaults to `process.env.DATABASE_URL`. May list several hosts,
   * libpq style: `postgres://app@db1:5432,db2:5432/shop?target_session_attrs=read-write` —
   * connections go to the one that accepts writes, and find it again after a failover.
   */
  readonly databaseUrl?: string | undefined;
  /** PGlite data directory used when there is no database URL. */
  readonly dataDir?: string;
  readonly maxConnections?: number;
  /**
   * PostgreSQL only: run the worker's hot statements as named prepared statements (default
   * `true`, `false` with `pooler`). Set `false` behind a connection pooler that cannot keep them
   * per client session (PgBouncer in transaction mode before 1.21).
   */
  readonly preparedStatements?: boolean;
  /**
   * PostgreSQL only: connections in pipeline mode, so that a transactional step sends BEGIN with
   * its ledger row and its commit with COMMIT, one round trip each (default `true`, always `false`
   * with `pooler`). Set `false` for a proxy that answers statements one at a time.
   */
  readonly pipeline?: boolean;
  /**
   * PostgreSQL only: the database URL goes through a pooler in transaction mode (PgBouncer
   * `pool_mode = transaction`): no named prepared statements (unless `preparedStatements: true`),
   * and LISTEN over `listenUrl`, a URL that bypasses that pooler — without one, workers and waits
   * poll. Default: from `LEDGERFLOW_POOLER=transaction` and `LEDGERFLOW_LISTEN_URL`; else none. See docs/operations/pgbouncer.md.
   */
  readonly pooler?: PoolerOptions;
  /**
   * PostgreSQL only: how long a new connection may take to connect and authenticate before it
   * fails like a lost one, so that the store moves on (to the next host of a multi-host URL)
   * instead of waiting for TCP. Default: the URL's `connect_timeout` (seconds, as libpq reads it),
   * else 10 s; 0 = no limit.
   */
  readonly connectTimeoutMs?: number;
  /**
   * PostgreSQL only: how long a statement may run before the store asks its host, over a fresh
   * connection, whether the backend serving it is still there and busy with it; a connection that
   * went silent is ended and its statement fails as a lost connection. Default 15 s; 0 = off.
   */
  readonly stalledStatementCheckMs?: number;
}

/**
 * The one place that picks the database: `DATABASE_URL` (or `databaseUrl`) → PostgreSQL via
 * `pg`; otherwise the embedded PGlite persisted under `.ledgerflow/db`.
 */
export async function openStore(options: OpenStoreOptions = {}): Promise<Store> {
  const databaseUrl = options.databaseUrl ?? process.env['DATABASE_URL'];
  if (databaseUrl) {
    const pooler = options.pooler ?? poolerFromEnvironment();
    return createPgStore({
      connectionString: databaseUrl,
      ...(pooler !== undefined ? { pooler } : {}),
      ...(options.maxConnections !== undefined ? { maxConnections: options.maxConnections } : {}),
      ...(options.preparedStatements !== undefined ? { preparedStatements: options.preparedStatements } : {}),
      ...(options.pipeline !== undefined ? { pipeline: options.pipeline } : {}),
      ...(options.connectTimeoutMs !== undefined ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
      ...(options.stalledStatementCheckMs !== undefined
        ? { stalledStatementCheckMs: options.stalledStatementCheckMs }
        : {}),
    });
  }
  return createPGliteStore({ dataDir: options.dataDir ?? DEFAULT_DATA_DIR });
}

/**
 * `LEDGERFLOW_POOLER=transaction` (and `LEDGERFLOW_LISTEN_URL`, the URL to LISTEN on): the
 * `pooler` option of a store `openStore` opens without one: for the CLI and worker processes.
 */
export function poolerFromEnvironment(env: NodeJS.ProcessEnv = process.env): PoolerOptions | undefined {
  const mode = env['LEDGERFLOW_POOLER'];
  const listenUrl = env['LEDGERFLOW_LISTEN_URL'];
  if (!mode) {
    if (listenUrl)
      throw new TypeError(
        'LEDGERFLOW_LISTEN_URL is set without LEDGERFLOW_POOLER: set LEDGERFLOW_POOLER=transaction too (or unset it).',
      );
    return undefined;
  }
  if (mode !== 'transaction') {
    throw new TypeError(
      `LEDGERFLOW_POOLER must be 'transaction' (got ${JSON.stringify(mode)}): the database URL goes through a pooler in transaction mode.`,
    );
  }
  return listenUrl ? { mode, listenUrl } : { mode };
}
