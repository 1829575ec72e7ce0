import type { PGlite } from '@electric-sql/pglite';
import {
  AbortedTransactionError,
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';

/**
 * Kysely over one PGlite instance. PGlite is a single connection, so the driver hands it out
 * to one holder at a time: a transaction owns it from BEGIN to COMMIT, as a pooled connection would.
 */
export class PGliteDialect implements Dialect {
  constructor(private readonly pglite: PGlite) {}
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new PGliteDriver(this.pglite);
  }
  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db);
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
}

class PGliteDriver implements Driver {
  private readonly connection: PGliteConnection;
  private queue: Promise<void> = Promise.resolve();

  constructor(pglite: PGlite) {
    this.connection = new PGliteConnection(pglite);
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    let release!: () => void;
    const previous = this.queue;
    this.queue = new Promise<void>((resolve) => (release = resolve));
    await previous;
    this.connection.release = release;
    return this.connection;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const isolation = settings.isolationLevel ? ` ISOLATION LEVEL ${settings.isolationLevel.toUpperCase()}` : '';
    await connection.executeQuery(CompiledQuery.raw(`BEGIN${isolation}`));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    // As in Kysely's pg driver: PostgreSQL answers COMMIT of a transaction that an earlier
    // (caught) error aborted with ROLLBACK. Reporting success there would lose writes silently.
    const { rows } = await connection.executeQuery<{ command?: string }>(CompiledQuery.raw('COMMIT'));
    if (rows[0]?.command === 'ROLLBACK') throw new AbortedTransactionError();
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('ROLLBACK'));
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as PGliteConnection).release();
  }

  async destroy(): Promise<void> {
    await this.queue;
  }
}

class PGliteConnection implements DatabaseConnection {
  release: () => void = () => {};

  constructor(private readonly pglite: PGlite) {}

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    // Without parameters `pg` uses the simple query protocol, which accepts several statements
    // (migration files rely on it); PGlite's `exec` is the same protocol, so both drivers agree.
    // Like Kysely over `pg`, a multi-statement query yields no rows.
    if (compiledQuery.parameters.length === 0) {
      const results = await this.pglite.exec(compiledQuery.sql);
      const result = results.length === 1 ? results[0] : undefined;
      if (result?.command === 'COMMIT' || result?.command === 'ROLLBACK')
        return { rows: [{ command: result.command } as R] };
      return {
        rows: (result?.rows ?? []) as R[],
        ...(result?.affectedRows !== undefined ? { numAffectedRows: BigInt(result.affectedRows) } : {}),
      };
    }
    const result = await this.pglite.query<R>(compiledQuery.sql, [...compiledQuery.parameters]);
    return {
      rows: result.rows,
      ...(result.affectedRows !== undefined ? { numAffectedRows: BigInt(result.affectedRows) } : {}),
    };
  }

  // biome-ignore lint/correctness/useYield: streaming is refused; the generator only throws.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('PGlite store does not support streaming queries');
  }
}
