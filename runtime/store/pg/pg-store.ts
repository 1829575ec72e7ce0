import type { Socket } from 'node:net';
import { Kysely, PostgresDialect, sql, type PostgresPool } from 'kysely';
import pg from 'pg';
import { z } from 'zod';
import { checkOptions, integer, rule } from '../../../dsl/option-checks.js';
import { INT8_OID, parseInt8, type Store } from '../store.js';
import type { LedgerflowDatabase } from '../tables.js';
import { overrideQuery } from './client-query.js';
import { corkingClient } from './corking-client.js';
import { isMultiHostUrl, parsePostgresUrl } from './postgres-url.js';
import { statementNamer } from './statement-names.js';
import { StallWatch, type WatchedHost } from './stall-watch.js';
import { failoverClient, mustDrop, WritableHostLocator } from './writable-host.js';
import { sqlStateOf } from '../sqlstate.js';

/*
 * The PostgreSQL store: its options (checked), the pool and its connections' limits, the
 * multi-host writable-host routing, the stalled-statement watch, LISTEN, and a pooler's settings.
 * Long because the pool's options, its client class and its hooks are one configuration: each
 * part reads the options the others set, and the parts with logic of their own are already
 * apart (postgres-url.ts, writable-host.ts, stall-watch.ts, statement-names.ts).
 */

export interface PgStoreOptions {
  readonly connectionString: string;
  /** Pool size; a worker needs about one connection per concurrent run plus one to listen. */
  readonly maxConnections?: number;
  readonly applicationName?: string;
  /**
   * The `pg.Client` subclass every connection (pooled and LISTEN) is made with. For tests and
   * benchmarks that count or cut a store's connections; production code leaves it unset.
   */
  readonly clientClass?: typeof pg.Client;
  /**
   * Run the worker's hot statements as named prepared statements (see `runtime/store/prepared.ts`).
   * Default `true`, or `false` with {@link PgStoreOptions.pooler}; `false` behind a pooler that
   * cannot keep them (PgBouncer in transaction mode before 1.21).
   */
  readonly preparedStatements?: boolean;
  /**
   * Connections in node-postgres's pipeline mode (`Store.pipelines`): a transactional step's
   * transaction sends BEGIN with its ledger row, and its commit with COMMIT, each pair in one
   * round trip (DESIGN.md "Pipelined on PostgreSQL"). Default `true`; always `false` with
   * {@link PgStoreOptions.pooler} (refused as `true` there: what a pooler forwards of a pipeline
   * is its own). `false` for a proxy in front of PostgreSQL that answers statements one at a time.
   */
  readonly pipeline?: boolean;
  /**
   * `connectionString` reaches PostgreSQL through a connection pooler in transaction mode
   * (PgBouncer `pool_mode = transaction`): see {@link PoolerOptions}.
   */
  readonly pooler?: PoolerOptions;
  /**
   * How long a new connection may take to connect and authenticate before it fails like a lost
   * one (a host that accepts TCP and then says nothing: a frozen VM, a black-holed network), so
   * that the store moves on — to the next host of a multi-host URL — instead of waiting for the
   * operating system's TCP timeout. Default: the URL's `connect_timeout` (seconds, as libpq reads
   * it; 0 = wait as long as the system does), else {@link DEFAULT_CONNECT_TIMEOUT_MS}.
   */
  readonly connectTimeoutMs?: number;
  /**
   * How long a statement may run before the store asks its host, over a fresh connection, whether
   * the backend serving it still exists; a connection whose host cannot be reached, no longer has
   * its backend, or has it idle while the statement waits is ended, and the statement fails as a
   * lost connection (see stall-watch.ts).
   * Default {@link DEFAULT_STALLED_STATEMENT_CHECK_MS}; 0 turns the watch off.
   */
  readonly stalledStatementCheckMs?: number;
}

/**
 * A pooler in front of the database that hands each client a server connection per transaction
 * (PgBouncer `pool_mode = transaction`): nothing of a session survives from one transaction to the
 * next. The store then sends no named prepared statements (unless `preparedStatements: true` says
 * the pooler keeps them, as PgBouncer >= 1.21 does with `max_prepared_statements`), and LISTENs
 * over `listenUrl` — or, without one, not at all: workers find new runs by their claim poll and
 * `waitForRun` polls the run's status. Everything else ledgerflow sends is already
 * transaction-scoped (advisory locks are `pg_advisory_xact_lock`, settings `SET LOCAL`, NOTIFY
 * is sent inside the transaction that commits it).
 */
export interface PoolerOptions {
  /** The pooler's mode; only `'transaction'` needs saying (session pooling is a plain connection). */
  readonly mode: 'transaction';
  /**
   * A URL of the same database that does not go through the transaction pooler (the server
   * itself, or a session-mode pool): each LISTEN holds one connection there for as long as it
   * lasts (one per worker, one per client that waits for runs). Without it the store does not
   * listen ({@link Store.listenUnavailable}).
   */
  readonly listenUrl?: string;
}

/** A statement running this long gets its host asked whether its backend still exists. */
export const DEFAULT_STALLED_STATEMENT_CHECK_MS = 15_000;

/** A connection's connect-and-authenticate limit when neither the URL nor the options give one. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

const wholeMilliseconds = rule(integer().min(0), 'must be a whole number of milliseconds >= 0');

/** What {@link PgStoreOptions} allow, of what is checked before a connection is made. */
const pgStoreOptionsSchema = z
  .object({
    pipeline: rule(z.boolean(), 'must be true or false').optional(),
    connectTimeoutMs: wholeMilliseconds.optional(),
    stalledStatementCheckMs: wholeMilliseconds.optional(),
    pooler: rule(
      z.strictObject({
        mode: rule(z.literal('transaction'), "must be 'transaction'"),
        listenUrl: rule(z.string().regex(/^postgres(ql)?:\/\//), 'must be a postgres:// URL').optional(),
      }),
      "must be { mode: 'transaction', listenUrl?: string }",
    ).optional(),
  })
  .refine((o) => !(o.pipeline === true && o.pooler !== undefined), {
    message: 'pipeline cannot be true with a pooler: leave it unset (a pooled store does not pipeline)',
  });

const firstProblem = (problems: readonly string[]): TypeError => new TypeError(`${problems[0]}.`);

/** The limit {@link PgStoreOptions.connectTimeoutMs} describes: options, else the URL's `connect_timeout`, else the default. */
export function connectTimeoutOf(options: Pick<PgStoreOptions, 'connectionString' | 'connectTimeoutMs'>): number {
  checkOptions(pgStoreOptionsSchema, options, firstProblem);
  if (options.connectTimeoutMs !== undefined) return options.connectTimeoutMs;
  const match = /[?&]connect_timeout=([^&#]*)/.exec(options.connectionString);
  if (match === null) return DEFAULT_CONNECT_TIMEOUT_MS;
  const seconds = Number(decodeURIComponent(match[1]!));
  if (!(Number.isInteger(seconds) && seconds >= 0)) {
    throw new TypeError(
      `connect_timeout=${match[1]} in the database URL must be a whole number of seconds >= 0 (0: no limit).`,
    );
  }
  // libpq: a value of 1 means 2 seconds (anything under 2 is raised to 2); 0 waits indefinitely.
  return seconds === 0 ? 0 : Math.max(seconds, 2) * 1_000;
}

/** A connect that took longer than the store's connect timeout: reported as a lost connection (`ETIMEDOUT`). */
export class ConnectTimeoutError extends Error {
  override readonly name = 'ConnectTimeoutError';
  readonly code = 'ETIMEDOUT';
}

/**
 * `Base` whose connections give up connecting after `timeoutMs` (node-postgres destroys the
 * socket) and fail with a {@link ConnectTimeoutError}, a connection error every caller already
 * retries — a multi-host store then forgets the host and looks for the writable one again.
 */
function timedClient(Base: typeof pg.Client, timeoutMs: number): typeof pg.Client {
  if (timeoutMs === 0) return Base;
  const baseConnect = Base.prototype.connect as unknown as (
    this: pg.Client,
    callback?: (error: Error | null) => void,
  ) => Promise<void> | undefined;
  class TimedClient extends Base {
    constructor(config?: string | pg.ClientConfig) {
      const given = typeof config === 'string' ? { connectionString: config } : (config ?? {});
      super({ ...given, connectionTimeoutMillis: given.connectionTimeoutMillis ?? timeoutMs });
    }
  }
  const explained = (client: pg.Client, error: Error): Error => {
    if (!/timeout expired|connection timeout/i.test(error.message)) return error;
    const { host, port } = client as unknown as { host: string; port: number };
    return new ConnectTimeoutError(
      `connecting to ${host}:${port} took longer than ${timeoutMs} ms (connect_timeout); the host is treated as unreachable`,
      { cause: error },
    );
  };
  // node-postgres's own calling styles, unchanged: with a callback (pg.Pool), it is called in the
  // tick that completed the connection, so the pool's error listener is on before the next message.
  TimedClient.prototype.connect = function connectInTime(
    this: pg.Client,
    callback?: (error: Error | null, client?: pg.Client) => void,
  ) {
    if (callback !== undefined) {
      baseConnect.call(this, (error) => (error ? callback(explained(this, error)) : callback(null, this)));
      return undefined;
    }
    return baseConnect.call(this)!.catch((error: Error) => {
      throw explained(this, error);
    });
  } as typeof Base.prototype.connect;
  return TimedClient;
}

const types = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/**
 * `Base` whose `query(text, values)` runs a text marked by `prepared()` as a named statement
 * (`{ name, text, values }`): node-postgres sends Parse only the first time a connection sees
 * the name, and the server keeps the parsed statement and its plan cache for the session.
 * Everything else passes through unchanged.
 */
function preparingClient(Base: typeof pg.Client): typeof pg.Client {
  const preparedStatementName = statementNamer();
  return overrideQuery(
    Base,
    (query) =>
      function preparedQuery(config, values, callback) {
        if (typeof config === 'string' && Array.isArray(values)) {
          const name = preparedStatementName(config);
          // A config object, not a named pg.Query: a clientClass wrapping query() sees the text and
          // answers with a promise, as for every other statement (tests' fault clients, the bench's counters).
          if (name !== undefined) return query.call(this, { name, text: config, values }, undefined, callback);
        }
        return query.call(this, config, values, callback);
      },
  );
}

/**
 * A `pg` pool: the durable production store. `connectionString` may list several hosts
 * (`postgres://db1:5432,db2:5432/app?target_session_attrs=read-write`, see postgres-url.ts):
 * every connection then goes to the host that accepts writes, found again after a failover
 * (writable-host.ts).
 */
export function createPgStore(options: PgStoreOptions): Store {
  checkOptions(pgStoreOptionsSchema, options, firstProblem);
  const applicationName = options.applicationName ?? 'ledgerflow';
  const connectTimeoutMs = connectTimeoutOf(options);
  const BaseClient = timedClient(options.clientClass ?? pg.Client, connectTimeoutMs);
  const target = isMultiHostUrl(options.connectionString) ? parsePostgresUrl(options.connectionString) : undefined;
  // One host as before: node-postgres parses the string. Several (or read-write asked for): each
  // connection picks its host, and starts from the first host's URL for everything else.
  const connectionString = target === undefined ? options.connectionString : target.urlFor(target.hosts[0]!);
  const ConnectingClient =
    target === undefined
      ? BaseClient
      : failoverClient(
          BaseClient,
          new WritableHostLocator({
            target,
            Client: BaseClient,
            clientConfig: { application_name: applicationName, types },
            connectTimeoutMs,
          }),
          target.targetSessionAttrs,
        );
  const prepares = options.preparedStatements ?? options.pooler === undefined;
  const pipelines = options.pipeline ?? options.pooler === undefined;
  const Statements = prepares ? preparingClient(ConnectingClient) : ConnectingClient;
  // A pipelining connection writes what is sent together in one write (corking-client.ts).
  const Client = pipelines ? corkingClient(Statements) : Statements;
  // LISTEN needs a session of its own: behind a transaction pooler, over `pooler.listenUrl` or not at all.
  const listenVia: { readonly Client: typeof pg.Client; readonly connectionString: string } | undefined =
    options.pooler === undefined
      ? { Client: ConnectingClient, connectionString }
      : options.pooler.listenUrl === undefined
        ? undefined
        : directClient(options.pooler.listenUrl, BaseClient, applicationName, connectTimeoutMs);
  const listenUnavailable =
    listenVia === undefined
      ? 'the store reaches PostgreSQL through a transaction pooler and was given no pooler.listenUrl to LISTEN on: workers and waits poll instead'
      : undefined;
  const pool = new pg.Pool({
    connectionString,
    ...(pipelines ? { pipeline: true } : {}),
    max: options.maxConnections ?? 10,
    application_name: applicationName,
    types,
    ...(Client !== pg.Client ? { Client } : {}),
  });
  // A client that loses its server (restart, pg_terminate_backend) must not crash the process.
  // The pool listens on idle clients only; a checked-out client between two queries of a
  // transaction emits 'error' with no listener, so every client gets its own. The next query
  // on it fails with a connection error, and the pool discards it on release.
  pool.on('error', () => {});
  const watch = stallWatch(
    options,
    (host) =>
      new BaseClient({
        connectionString: target === undefined ? options.connectionString : target.urlFor(host),
        application_name: applicationName,
        types,
        connectionTimeoutMillis:
          connectTimeoutMs === 0 ? PROBE_CONNECT_TIMEOUT_MS : Math.min(connectTimeoutMs, PROBE_CONNECT_TIMEOUT_MS),
      }),
  );
  pool.on('connect', (client) => {
    client.on('error', () => {});
    watch?.add(client);
  });
  pool.on('remove', (client) => watch?.remove(client));
  const db = new Kysely<LedgerflowDatabase>({
    dialect: new PostgresDialect({ pool: target === undefined ? pool : droppingReadOnly(pool) }),
  });
  const location = `PostgreSQL at ${target === undefined ? hostAndDatabase(options.connectionString) : `${target.description} (${target.targetSessionAttrs})`}`;

  return {
    kind: 'pg',
    db,
    location: options.pooler === undefined ? location : `${location} through a transaction pooler`,
    ...(listenUnavailable !== undefined ? { listenUnavailable } : {}),
    async listen(channel, onNotify, onLost, listenOptions = {}) {
      if (listenVia === undefined) throw new Error(`cannot LISTEN on "${channel}": ${listenUnavailable}`);
      const client = new listenVia.Client({
        connectionString: listenVia.connectionString,
        application_name: applicationName,
        types,
      });
      // A dedicated connection: losing it (pg_terminate_backend, server restart, network) ends
      // the subscription silently unless reported — 'error' and/or 'end' fire, once reported.
      let state: 'subscribing' | 'subscribed' | 'lost' | 'closed' = 'subscribing';
      const lose = (error: Error): void => {
        if (state !== 'subscribed') return;
        state = 'lost';
        client.end().catch(() => {});
        onLost?.(error);
      };
      client.on('error', (error) => lose(error));
      client.on('end', () => lose(new Error(`the connection listening on "${channel}" ended`)));
      try {
        await client.connect();
        if (listenOptions.keepProcessAlive === false)
          (client.connection.stream as Partial<Pick<Socket, 'unref'>>).unref?.();
        client.on('notification', (message) => {
          if (message.channel === channel) onNotify(message.payload ?? '');
        });
        await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      } catch (error) {
        state = 'closed';
        await client.end().catch(() => {});
        throw error;
      }
      state = 'subscribed';
      return async () => {
        if (state === 'closed') return;
        state = 'closed';
        await client.end().catch(() => {});
      };
    },
    ...(pipelines ? { pipelines: true as const } : {}),
    async terminateBackend(pid) {
      await sql`SELECT pg_terminate_backend(${pid})`.execute(db);
    },
    async close() {
      watch?.stop();
      await db.destroy();
    },
  };
}

/**
 * The client class and URL for connections to `url` (a pooler's `listenUrl`), which may list
 * several hosts as the main URL may: then each connection goes to the writable one.
 */
function directClient(
  url: string,
  BaseClient: typeof pg.Client,
  applicationName: string,
  connectTimeoutMs: number,
): { readonly Client: typeof pg.Client; readonly connectionString: string } {
  if (!isMultiHostUrl(url)) return { Client: BaseClient, connectionString: url };
  const target = parsePostgresUrl(url);
  const locator = new WritableHostLocator({
    target,
    Client: BaseClient,
    clientConfig: { application_name: applicationName, types },
    connectTimeoutMs,
  });
  return {
    Client: failoverClient(BaseClient, locator, target.targetSessionAttrs),
    connectionString: target.urlFor(target.hosts[0]!),
  };
}

/** How long a probe of a stalled statement's host waits to connect, at most. */
const PROBE_CONNECT_TIMEOUT_MS = 5_000;

/** The store's {@link StallWatch}, probing with clients made by `probeClient`; undefined when turned off. */
function stallWatch(
  options: Pick<PgStoreOptions, 'stalledStatementCheckMs'>,
  probeClient: (host: WatchedHost) => pg.Client,
): StallWatch | undefined {
  const checkAfterMs = options.stalledStatementCheckMs ?? DEFAULT_STALLED_STATEMENT_CHECK_MS;
  if (checkAfterMs === 0) return undefined;
  return new StallWatch({
    checkAfterMs,
    async probe(host, pids, idleForMs) {
      const client = probeClient(host);
      client.on('error', () => {});
      try {
        await client.connect();
      } catch (error) {
        // The server answered (e.g. too many connections): it is there; ask again later.
        if (sqlStateOf(error) !== undefined) throw error;
        return 'unreachable';
      }
      try {
        // Idle: in one of the states of a backend waiting for its client's next message. Another
        // role's backend shows a NULL state (and 'disabled' without track_activities): not idle.
        const { rows } = await client.query<{ me: number; alive: number[]; idle: number[] }>(
          `SELECT pg_backend_pid() AS me,
                  ARRAY(SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[])) AS alive,
                  ARRAY(SELECT pid FROM pg_stat_activity
                         WHERE pid = ANY($1::int[])
                           AND state IN ('idle', 'idle in transaction', 'idle in transaction (aborted)')
                           AND state_change <= clock_timestamp() - make_interval(secs => $2::float8 / 1000)) AS idle`,
          [pids, idleForMs],
        );
        // Behind a pooler or proxy (PgBouncer, RDS Proxy) the pid a connection was given at startup
        // is the proxy's, not a backend's: only an unreachable host can be told apart there.
        if (rows[0]!.me !== (client as unknown as { processID: number | null }).processID)
          return { alive: new Set(pids), idle: new Set() };
        return { alive: new Set(rows[0]!.alive), idle: new Set(rows[0]!.idle) };
      } finally {
        await client.end().catch(() => {});
      }
    },
  });
}

function hostAndDatabase(connectionString: string): string {
  const url = new URL(connectionString);
  return `${url.hostname}:${url.port || '5432'}${url.pathname}`;
}

/**
 * The pool as Kysely sees it, except that a connection whose host turned read-only (a demoted
 * primary still up) is released with an error, which makes `pg.Pool` close it instead of
 * handing it out again: its replacement connects to the writable host.
 */
function droppingReadOnly(pool: pg.Pool): PostgresPool {
  return {
    async connect() {
      const client = await pool.connect();
      const release = client.release;
      client.release = (error?: Error | boolean) =>
        // Kysely passes `false` for a healthy connection.
        release(error || (mustDrop(client) ? new Error("the connection's host no longer accepts writes") : undefined));
      return client;
    },
    end: () => pool.end(),
  };
}
