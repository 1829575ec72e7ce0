import {
  CompiledQuery,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
} from 'kysely';

/** Runs one compiled statement wherever the handle's owner decides. */
export type StatementRunner = <R>(compiled: CompiledQuery) => Promise<QueryResult<R>>;

/**
 * A Kysely handle for a handler (`ctx.tx`, `ctx.db`) whose every statement goes to `run`: the
 * owner, not the handler, decides the connection and the transaction. Its own
 * `transaction()` either does nothing (the owner's transaction is already the one: `ctx.tx`)
 * or is refused with `transactions` as the message (`ctx.db`).
 */
export function statementHandle(run: StatementRunner, options: { readonly name: string; readonly transactions: 'owner' | string }): Kysely<unknown> {
  return new Kysely<unknown>({ dialect: new StatementDialect(run, options) });
}

class StatementDialect implements Dialect {
  constructor(
    private readonly run: StatementRunner,
    private readonly options: { readonly name: string; readonly transactions: 'owner' | string },
  ) {}
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    const { name, transactions } = this.options;
    const connection: DatabaseConnection = {
      executeQuery: (compiled) => this.run(compiled),
      // eslint-disable-next-line require-yield
      streamQuery: async function* <R>(): AsyncIterableIterator<QueryResult<R>> {
        throw new TypeError(`${name} does not stream; use execute() instead.`);
      },
    };
    return {
      init: async () => {},
      acquireConnection: async () => connection,
      beginTransaction: async () => {
        if (transactions !== 'owner') throw new TypeError(transactions);
      },
      commitTransaction: async () => {},
      rollbackTransaction: async () => {},
      releaseConnection: async () => {},
      destroy: async () => {},
    };
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db);
  }
}
