import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { createCoreMigratedPGlite } from '../../runtime/testing/pglite-template.js';
import type { Store } from '../../runtime/store/store.js';
import { coreMigrations } from '../../runtime/migrate/core-migrations.js';
import { migrateForTest } from './migrate-for-test.js';

/** A throwaway database with the core schema migrated; `close()` also deletes it. */
export interface TestStore extends Store {
  /**
   * Connection string of this database (pg only): for child processes and extra pools. Always
   * the server's own, also when the store itself goes through PgBouncer (see
   * {@link createPgTestStore}).
   */
  readonly url: string | undefined;
}

export interface PgTestStoreOptions {
  /** Server to create the database on; defaults to vitest's `inject('postgresUrl')`. */
  readonly serverUrl?: string;
  readonly maxConnections?: number;
}

/**
 * How the `pgbouncer` project's stores LISTEN (LEDGERFLOW_TEST_PGBOUNCER_LISTEN): `direct` (the
 * default) gives them the server's own URL as `pooler.listenUrl`; `poll` gives none, so that
 * their workers and waits poll.
 */
function pgBouncerListen(): 'direct' | 'poll' {
  const mode = process.env['LEDGERFLOW_TEST_PGBOUNCER_LISTEN'] || 'direct';
  if (mode !== 'direct' && mode !== 'poll')
    throw new Error(`LEDGERFLOW_TEST_PGBOUNCER_LISTEN must be direct or poll (got ${mode}).`);
  return mode;
}

/** Bump when the way templates are prepared changes, so stale templates are not reused. */
const TEMPLATE_FORMAT = 2;
/** Keyed by every core migration (name and content): adding or changing one builds new templates. */
const templateHash = createHash('sha256')
  .update([`${TEMPLATE_FORMAT}`, ...coreMigrations().flatMap((m) => [m.name, m.checksum])].join('\n'))
  .digest('hex')
  .slice(0, 12);

/**
 * A fresh PostgreSQL database for one test file (or describe block), copied from a template
 * that holds the migrated core schema. The template is prepared once per server and schema
 * version, under an advisory lock so parallel test files do not race to build it.
 *
 * @example
 * const store = await createPgTestStore();
 * await migrateForTest(store, [orderWorkflow]);
 * // … spawn a worker process with DATABASE_URL = store.url …
 * await store.close(); // drops the database
 */
export async function createPgTestStore(options: PgTestStoreOptions = {}): Promise<TestStore> {
  const serverUrl = options.serverUrl ?? inject('postgresUrl');
  const template = await ensureTemplate(serverUrl);
  const name = `lf_test_${randomBytes(6).toString('hex')}`;
  await admin(serverUrl, (client) => client.query(`CREATE DATABASE ${name} TEMPLATE ${template}`));
  const url = databaseUrl(serverUrl, name);
  // The `pgbouncer` project (global-setup.ts) runs the suites with every test store behind a
  // PgBouncer in transaction mode: its store says so (`pooler`). Extra pools and child processes
  // a test opens from `url` reach the server directly.
  const bouncerUrl = options.serverUrl === undefined ? inject('pgbouncerUrl') : undefined;
  const pooled =
    bouncerUrl === undefined
      ? {}
      : {
          connectionString: databaseUrl(bouncerUrl, name),
          pooler: { mode: 'transaction' as const, ...(pgBouncerListen() === 'direct' ? { listenUrl: url } : {}) },
          ...(process.env['LEDGERFLOW_TEST_PGBOUNCER_PREPARED'] === '1' ? { preparedStatements: true } : {}),
        };
  const store = createPgStore({
    connectionString: url,
    ...(options.maxConnections !== undefined ? { maxConnections: options.maxConnections } : {}),
    ...pooled,
  });
  return {
    ...store,
    url,
    async close() {
      await store.close();
      await admin(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

const templates = new Map<string, Promise<string>>();

function ensureTemplate(serverUrl: string): Promise<string> {
  let template = templates.get(serverUrl);
  if (template === undefined) {
    template = prepareTemplate(serverUrl);
    templates.set(serverUrl, template);
  }
  return template;
}

async function prepareTemplate(serverUrl: string): Promise<string> {
  const name = `lf_template_${templateHash}`;
  await admin(serverUrl, async (client) => {
    // Session lock on the admin connection: other test processes wait here until the template exists.
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
    try {
      const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (exists.rowCount) return;
      // Built under a scratch name and renamed when complete, so a crash never leaves a half-built template.
      const scratch = `${name}_build_${randomBytes(4).toString('hex')}`;
      await client.query(`CREATE DATABASE ${scratch}`);
      const store = createPgStore({ connectionString: databaseUrl(serverUrl, scratch), maxConnections: 1 });
      try {
        await migrateForTest(store);
      } finally {
        await store.close();
      }
      await client.query(`ALTER DATABASE ${scratch} RENAME TO ${name}`);
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [name]);
    }
  });
  return name;
}

async function admin<T>(serverUrl: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/**
 * A PGlite database with the core schema migrated, in memory unless `dataDir` is given (a
 * CLI under test can then open that directory once this store is closed): the testing kit's
 * cached template (runtime/testing/pglite-template.ts), so booting and migrating is paid once.
 */
export async function createPGliteTestStore(options: { readonly dataDir?: string } = {}): Promise<TestStore> {
  const store = await createCoreMigratedPGlite(options);
  return { ...store, url: undefined };
}
