/*
 * The Kysely dialect behind the handles a handler gets (`ctx.tx` of a transactional step,
 * `ctx.db` of a plain one): every statement goes to a runner its owner supplies, which picks the
 * connection and the transaction; the handle's own `transaction()` is a no-op or refused. No state
 * of its own.
 */
import {
  type CompiledQuery,
  DefaultQueryExecutor,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SingleConnectionProvider,
  Transaction,
  type ConnectionProvider,
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
export function statementHandle(
  run: StatementRunner,
  options: { readonly name: string; readonly transactions: 'owner' | string },
): Kysely<unknown> {
  return new Kysely<unknown>({ dialect: new StatementDialect(run, options) });
}

class StatementDialect implements Dialect {
  constructor(
    private readonly run: StatementRunner,
    private readonly options: { readonly name: string; readonly transactions: 'owner' | string },
  ) {}
  createAdapter() {
    return ADAPTER;
  }
  createDriver(): Driver {
    return ownerDriver(handleConnection(this.run, this.options.name), this.options.transactions);
  }
  createQueryCompiler() {
    return COMPILER;
  }
  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db);
  }
}

/**
 * `ctx.tx`: a Kysely `Transaction` whose every statement goes to `run`, built without a Kysely
 * instance of its own or Kysely's transaction machinery (a `new Kysely` and a
 * `transaction().execute()` per transactional step cost more worker CPU than the step's own
 * bookkeeping). It behaves as the `Transaction` that `transaction().execute()` hands its
 * callback: one statement at a time, `transaction()` and `connection()` refused, and once
 * {@link TransactionHandle.end} is called (the handler returned or threw) every statement not yet
 * on its way is refused with Kysely's own message — a handler's leftover promise can never send
 * beside the step's commit.
 */
export interface TransactionHandle {
  readonly handle: Transaction<unknown>;
  /** The handler is done with it: `committed` when it returned, `rolled back` when it threw. */
  end(status: 'committed' | 'rolled back'): void;
}

export function transactionHandle(run: StatementRunner, name: string): TransactionHandle {
  let status: 'active' | 'committed' | 'rolled back' = 'active';
  const assertActive = (): void => {
    if (status === 'committed') throw new Error('Transaction is already committed');
    if (status !== 'active') throw new Error('Transaction is already rolled back');
  };
  const connection = handleConnection(run, name);
  const single = new SingleConnectionProvider(connection);
  // Checked when a statement asks for the connection and again when it gets it (it may have
  // queued behind another statement of the handler's), as Kysely's own transaction does.
  const provider: ConnectionProvider = {
    provideConnection: (consumer) => {
      assertActive();
      return single.provideConnection((conn) => {
        assertActive();
        return consumer(conn);
      });
    },
  };
  const handle = new Transaction<unknown>({
    config: { dialect: OWNER_DIALECT },
    dialect: OWNER_DIALECT,
    driver: ownerDriver(connection, 'owner'),
    executor: new DefaultQueryExecutor(COMPILER, ADAPTER, provider, []),
  });
  return {
    handle,
    end: (ended) => {
      if (status === 'active') status = ended;
    },
  };
}

/** Stateless between statements (each compile starts afresh), so every handle shares one. */
const COMPILER = new PostgresQueryCompiler();
const ADAPTER = new PostgresAdapter();

function handleConnection(run: StatementRunner, name: string): DatabaseConnection {
  return {
    executeQuery: (compiled) => run(compiled),
    // biome-ignore lint/correctness/useYield: streaming is refused; the generator only throws.
    streamQuery: async function* <R>(): AsyncIterableIterator<QueryResult<R>> {
      throw new TypeError(`${name} does not stream; use execute() instead.`);
    },
  };
}

/** A driver whose one connection is the owner's: opening, committing and releasing it do nothing; `transactions` other than `owner` is the refusal of a transaction. */
function ownerDriver(connection: DatabaseConnection, transactions: 'owner' | string): Driver {
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

/** The dialect a {@link transactionHandle} names (for `introspection`); it never makes a driver of its own. */
const OWNER_DIALECT: Dialect = new StatementDialect(
  () => Promise.reject(new Error('internal: a ctx.tx handle runs its statements through its own connection')),
  { name: 'ctx.tx', transactions: 'owner' },
);
