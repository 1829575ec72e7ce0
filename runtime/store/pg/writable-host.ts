import type pg from 'pg';
import { SQLSTATE } from '../sqlstate.js';
import type { PostgresHost, PostgresTarget } from './postgres-url.js';

/**
 * Connections to whichever host of a multi-host URL accepts writes (`target_session_attrs=read-write`),
 * so that a worker or client follows a failover to the promoted standby without a restart.
 *
 * Why a `pg.Client` subclass: `pg.Pool` makes each connection with `new Client(options)` and
 * `connect()`, and a `pg.Client` connects once, to the host it was made for. The subclass picks
 * the host inside `connect()`, before connecting: the pool (and every LISTEN connection, made
 * with the same class) then gets writable connections, and drops them as usual when they break.
 *
 * Picking the host: {@link WritableHostLocator} remembers the host that last accepted writes and
 * connections go there directly. A connection that cannot reach it, or finds it read-only (a
 * standby, or a primary set to `default_transaction_read_only`), fails — as any connection to a
 * restarting server does, and the caller retries — and makes the locator forget it; the next
 * connection probes the hosts in order with a short-lived connection each and remembers the
 * first that accepts writes.
 *
 * Read-only is judged at connect from what the server reports with the session (PostgreSQL 14+:
 * `in_hot_standby`, `default_transaction_read_only`; older servers are asked). A host that turns
 * read-only later is found out by its connections: the server reports the change (the
 * connection then emits `error`, as a broken one does, and is forgotten with its host), or a
 * write fails with SQLSTATE 25006 — and that connection is dropped when released ({@link mustDrop}).
 */

/** No host of the URL accepted a read-write session; `attempts` says what each one answered. */
export class NoWritableHostError extends Error {
  override readonly name = 'NoWritableHostError';
  /** An errno-style code: callers that treat `E…` codes as "the database is unreachable" do so here too. */
  readonly code = 'ENOWRITABLEHOST';
  constructor(readonly attempts: ReadonlyArray<{ readonly host: string; readonly reason: string }>) {
    super(
      `No host accepts writes (target_session_attrs=read-write): ${attempts.map((a) => `${a.host} ${a.reason}`).join('; ')}`,
    );
  }
}

/** The connection reached a host that does not accept writes. */
export class ReadOnlyHostError extends Error {
  override readonly name = 'ReadOnlyHostError';
  readonly code = 'EREADONLYHOST';
}

/** How long a probe waits for a host to answer before trying the next one, unless the store's connect timeout is shorter. */
const PROBE_TIMEOUT_MS = 5_000;

export interface WritableHostLocatorOptions {
  readonly target: PostgresTarget;
  /** The class probes connect with (no prepared statements, no failover of its own). */
  readonly Client: typeof pg.Client;
  /** Settings every probe shares with real connections (types, application_name). */
  readonly clientConfig: pg.ClientConfig;
  /** The store's connect timeout (0: none); a probe waits at most this, and at most {@link PROBE_TIMEOUT_MS}. */
  readonly connectTimeoutMs?: number;
}

export class WritableHostLocator {
  readonly #options: WritableHostLocatorOptions;
  #writable: PostgresHost | undefined;
  #probing: Promise<PostgresHost> | undefined;

  constructor(options: WritableHostLocatorOptions) {
    this.#options = options;
  }

  /** The host connections should go to: the remembered one, or the first found writable by a probe. */
  writable(): Promise<PostgresHost> {
    if (this.#writable !== undefined) return Promise.resolve(this.#writable);
    this.#probing ??= this.#probe().finally(() => (this.#probing = undefined));
    return this.#probing;
  }

  /** `host` failed a connection or turned out read-only: the next connection probes again. */
  forget(host: PostgresHost): void {
    if (this.#writable === host) this.#writable = undefined;
  }

  async #probe(): Promise<PostgresHost> {
    const { target, Client, clientConfig } = this.#options;
    const attempts: Array<{ host: string; reason: string }> = [];
    for (const host of target.hosts) {
      const limit = this.#options.connectTimeoutMs;
      const probeTimeoutMs = limit === undefined || limit === 0 ? PROBE_TIMEOUT_MS : Math.min(limit, PROBE_TIMEOUT_MS);
      const client = new Client({
        ...clientConfig,
        connectionString: target.urlFor(host),
        connectionTimeoutMillis: probeTimeoutMs,
      });
      client.on('error', () => {});
      try {
        await client.connect();
        const readOnly = await askReadOnly(client);
        if (readOnly === undefined || target.targetSessionAttrs === 'any') {
          this.#writable = host;
          return host;
        }
        attempts.push({ host: `${host.host}:${host.port}`, reason: `is read-only (${readOnly})` });
      } catch (error) {
        attempts.push({
          host: `${host.host}:${host.port}`,
          reason: `did not answer (${error instanceof Error ? error.message || String((error as { code?: unknown }).code) : String(error)})`,
        });
      } finally {
        await client.end().catch(() => {});
      }
    }
    throw new NoWritableHostError(attempts);
  }
}

/** Why a session is read-only, or `undefined` when it accepts writes. */
async function askReadOnly(client: pg.Client): Promise<string | undefined> {
  const { rows } = await client.query<{ in_recovery: boolean; read_only: string }>(
    `SELECT pg_is_in_recovery() AS in_recovery, current_setting('transaction_read_only') AS read_only`,
  );
  const row = rows[0];
  if (row?.in_recovery === true) return 'a standby in recovery';
  if (row?.read_only === 'on') return 'default_transaction_read_only is on';
  return undefined;
}

/** A connection marked by {@link failoverClient}'s clients to be dropped instead of pooled again. */
const dropped = new WeakSet<pg.Client>();

/** Whether `client` found its host read-only since it connected: release it with an error so the pool drops it. */
export function mustDrop(client: pg.Client): boolean {
  return dropped.has(client);
}

type ConnectCallback = (error: Error | null, client?: pg.Client) => void;

/**
 * `Base` that connects to the host `locator` names and refuses (fails `connect`, forgets the
 * host) one that is read-only; once connected, a change to read-only reported by the server, or
 * a write refused with 25006, marks the connection for {@link mustDrop}.
 */
export function failoverClient(
  Base: typeof pg.Client,
  locator: WritableHostLocator,
  attrs: PostgresTarget['targetSessionAttrs'],
): typeof pg.Client {
  const baseConnect = Base.prototype.connect as (this: pg.Client) => Promise<pg.Client>;
  class FailoverClient extends Base {}
  defineConnect(FailoverClient, (client) => connectWritable(client, baseConnect, locator, attrs));
  return FailoverClient;
}

/**
 * Makes `connect(client)` the class's `connect()`, in both of `pg.Client`'s calling styles (a
 * promise, or a callback as `pg.Pool` uses). `pg.Pool` adds its `error` listener in its callback;
 * node-postgres calls that callback in the same tick as the server's ReadyForQuery, but an
 * asynchronous `connect` calls it a microtask later — and a server error that arrived in the same
 * packet (a backend terminated just as it became ready) would meanwhile be emitted with no
 * listener, crashing the process. So the client carries a listener of its own until the caller's
 * callback has run; the error it swallows leaves the client unqueryable, which the caller's first
 * query reports as a lost connection.
 */
export function defineConnect(Cls: typeof pg.Client, connect: (client: pg.Client) => Promise<pg.Client>): void {
  Cls.prototype.connect = function connectVia(this: pg.Client, callback?: ConnectCallback) {
    const connecting = connect(this);
    if (callback === undefined) return connecting;
    const bridge = (): void => {};
    this.on('error', bridge);
    connecting.then(
      (client) => {
        try {
          callback(null, client);
        } finally {
          this.removeListener('error', bridge);
        }
      },
      (error: Error) => {
        this.removeListener('error', bridge);
        callback(error);
      },
    );
    return undefined;
  } as typeof Cls.prototype.connect;
}

async function connectWritable(
  client: pg.Client,
  baseConnect: (this: pg.Client) => Promise<pg.Client>,
  locator: WritableHostLocator,
  attrs: PostgresTarget['targetSessionAttrs'],
): Promise<pg.Client> {
  const host = await locator.writable();
  const settable = client as unknown as {
    host: string;
    port: number;
    connectionParameters: { host: string; port: number };
  };
  settable.host = settable.connectionParameters.host = host.host;
  settable.port = settable.connectionParameters.port = host.port;
  const reported = new Map<string, string>();
  let established = false;
  const connection = (client as unknown as { connection: NodeJS.EventEmitter }).connection;
  connection.on('parameterStatus', (message: { parameterName: string; parameterValue: string }) => {
    reported.set(message.parameterName, message.parameterValue);
    if (attrs !== 'read-write' || !isReadOnlyReport(message)) return;
    dropped.add(client);
    // Once connected, as a lost connection is reported: the pool closes an idle client that
    // errs, and a LISTEN connection ends its subscription (which is then opened elsewhere).
    if (established) {
      locator.forget(host);
      client.emit(
        'error',
        new ReadOnlyHostError(`${host.host}:${host.port} turned read-only (${message.parameterName} = on)`),
      );
    }
  });
  connection.on('errorMessage', (message: { code?: string }) => {
    if (message.code === SQLSTATE.READ_ONLY_SQL_TRANSACTION) dropped.add(client);
  });
  try {
    await baseConnect.call(client);
  } catch (error) {
    locator.forget(host);
    throw error;
  }
  if (attrs === 'any') return client;
  // PostgreSQL 14+ reports both settings at startup; an older server is asked.
  const readOnly = reported.has('in_hot_standby') ? readOnlyReported(reported) : await askReadOnly(client);
  if (readOnly === undefined) {
    established = true;
    return client;
  }
  locator.forget(host);
  await client.end().catch(() => {});
  throw new ReadOnlyHostError(
    `${host.host}:${host.port} is read-only (${readOnly}); the next connection looks for the writable host`,
  );
}

function readOnlyReported(reported: ReadonlyMap<string, string>): string | undefined {
  if (reported.get('in_hot_standby') === 'on') return 'a standby in recovery';
  if (reported.get('default_transaction_read_only') === 'on') return 'default_transaction_read_only is on';
  return undefined;
}

function isReadOnlyReport(message: { parameterName: string; parameterValue: string }): boolean {
  return (
    (message.parameterName === 'in_hot_standby' || message.parameterName === 'default_transaction_read_only') &&
    message.parameterValue === 'on'
  );
}
