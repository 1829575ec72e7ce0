import { findDevServer } from '../dev/dev-server-file.js';
import { DEFAULT_DATA_DIR, openStore } from '../store/open-store.js';
import { isMultiHostUrl, parsePostgresUrl, PostgresUrlError } from '../store/pg/postgres-url.js';
import { createPGliteStore } from '../store/pglite/pglite-store.js';
import type { Store } from '../store/store.js';
import type { CliIo } from './cli-io.js';
import { UsageError } from './command.js';

export interface StoreFlags {
  readonly databaseUrl: string | undefined;
  readonly dataDir: string | undefined;
}

/**
 * `--database-url`, else `--data-dir` (PGlite), else `$DATABASE_URL`, else PGlite at
 * `.ledgerflow/db`. An explicit `--data-dir` wins over the environment so a local embedded
 * run does not need DATABASE_URL unset. PGlite while `ledgerflow dev` serves that directory
 * (its `dev.json` beside it) is the dev server, over the PostgreSQL protocol: PGlite itself
 * allows one process. The location goes to stderr, where it does not disturb `--json`.
 */
export async function openCliStore(flags: StoreFlags, io: CliIo): Promise<Store> {
  if (flags.databaseUrl !== undefined && flags.dataDir !== undefined) {
    throw new UsageError(
      '--database-url (PostgreSQL) and --data-dir (embedded PGlite) cannot be used together; pick one.',
    );
  }
  const databaseUrl =
    flags.databaseUrl ?? (flags.dataDir === undefined ? process.env['DATABASE_URL'] || undefined : undefined);
  if (databaseUrl !== undefined) {
    let protocol: string;
    try {
      // A host list (db1:5432,db2:5432) is not a WHATWG URL: its scheme is read here, its hosts checked below.
      protocol = isMultiHostUrl(databaseUrl)
        ? `${databaseUrl.slice(0, databaseUrl.indexOf(':'))}:`
        : new URL(databaseUrl).protocol;
    } catch {
      throw new UsageError(`The database URL is not a URL; expected postgres://user:password@host:5432/database.`);
    }
    if (protocol !== 'postgres:' && protocol !== 'postgresql:') {
      throw new UsageError(`The database URL must start with postgres:// or postgresql:// (got ${protocol}//…).`);
    }
    if (isMultiHostUrl(databaseUrl)) {
      try {
        parsePostgresUrl(databaseUrl);
      } catch (error) {
        if (error instanceof PostgresUrlError) throw new UsageError(error.message);
        throw error;
      }
    }
    return openStore({ databaseUrl });
  }
  const dataDir = flags.dataDir ?? DEFAULT_DATA_DIR;
  const devServer = findDevServer(dataDir);
  if (devServer !== undefined) {
    io.err(
      `Using the dev server at ${devServer.url} (ledgerflow dev, pid ${devServer.pid}) for PGlite at ${dataDir}.\n`,
    );
    return openStore({ databaseUrl: devServer.url });
  }
  const store = await createPGliteStore({ dataDir });
  io.err(`Using ${store.location}. Set DATABASE_URL or pass --database-url to use PostgreSQL.\n`);
  return store;
}
