import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { LedgerflowDatabase } from 'ledgerflow/schema';
import type { Store } from 'ledgerflow/runtime';
import { INT8_OID, parseInt8 } from '../../runtime/store/store.js';

/** A store over its own pool whose Kysely logs every statement, BEGIN/COMMIT included. */
export function countingStore(url: string, onQuery: (sqlText: string) => void): Store {
  const pool = new pg.Pool({
    connectionString: url,
    max: 4,
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });
  // The database is dropped WITH (FORCE) at the end: an idle client it ends must not crash the test process.
  pool.on('error', () => {});
  const db = new Kysely<LedgerflowDatabase>({
    dialect: new PostgresDialect({ pool }),
    log: (event) => onQuery(event.query.sql),
  });
  return {
    kind: 'pg',
    db,
    location: 'counting pool',
    listen: async () => async () => {},
    close: () => db.destroy(),
  };
}

/** Commits in a statement sequence: each BEGIN…COMMIT, and each statement outside one. */
export function commitsIn(statements: readonly string[]): number {
  let commits = 0;
  let inTransaction = false;
  for (const statement of statements) {
    const verb = statement.trim().toLowerCase();
    if (/^begin\b/.test(verb)) inTransaction = true;
    else if (verb === 'commit') {
      inTransaction = false;
      commits += 1;
    } else if (verb === 'rollback') inTransaction = false;
    else if (!inTransaction) commits += 1;
  }
  return commits;
}
