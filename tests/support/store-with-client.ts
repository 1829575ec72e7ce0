import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { INT8_OID, parseInt8, type Store } from '../../runtime/store/store.js';
import type { LedgerflowDatabase } from '../../runtime/store/tables.js';

/**
 * A PostgreSQL store whose connections are `Client` (a pg.Client subclass that misbehaves on
 * purpose: loses an answer, holds a statement), with the runtime's int8 parsing and no LISTEN.
 * For tests that need a connection to fail in one exact way; the runtime's own store is
 * `createPgStore`.
 */
export function storeWithClient(url: string, Client: typeof pg.Client, location: string): Store {
  const pool = new pg.Pool({
    connectionString: url,
    max: 4,
    Client,
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<LedgerflowDatabase>({ dialect: new PostgresDialect({ pool }) });
  return { kind: 'pg', db, location, listen: async () => async () => {}, close: () => db.destroy() };
}
