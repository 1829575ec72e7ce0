import { randomInt } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { sql } from 'kysely';
import type { ExclusiveSession, PGliteStore } from '../store/pglite/pglite-store.js';
import {
  authenticationOk,
  backendKeyData,
  CANCEL_REQUEST_CODE,
  closeStatementMessage,
  commandComplete,
  errorResponse,
  GSSENC_REQUEST_CODE,
  notification,
  notificationResponse,
  parameterStatus,
  PROTOCOL_V3,
  queryMessage,
  queryText,
  readyForQuery,
  renameStatements,
  splitMessages,
  SSL_REQUEST_CODE,
  syncMessage,
  transactionStatus,
  type TransactionStatus,
  type WireMessage,
} from './wire-protocol.js';

/** Bridge connections report pids from here up: never PGlite's own `pg_backend_pid()`. */
const FIRST_PID = 100_000;

/** Session settings a client learns at startup (ParameterStatus), read once from PGlite. */
const REPORTED_SETTINGS = [
  'server_version',
  'server_encoding',
  'client_encoding',
  'DateStyle',
  'IntervalStyle',
  'TimeZone',
  'integer_datetimes',
  'standard_conforming_strings',
] as const;

/** LISTEN/UNLISTEN as node-postgres sends them: one statement, simple query protocol. */
const LISTEN_STATEMENT = /^\s*(LISTEN|UNLISTEN)\s+("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*|\*)\s*;?\s*$/i;

export interface WireBridgeOptions {
  /** Default 127.0.0.1: the bridge has no authentication, so it must not listen beyond this machine. */
  readonly host?: string;
  /** Default 0: a free port the system picks. */
  readonly port?: number;
}

export interface WireBridge {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`: what `DATABASE_URL` or `--database-url` takes. */
  readonly url: string;
  readonly port: number;
  /** Stops accepting, ends every connection (rolling back what they left open) and waits for that. */
  close(): Promise<void>;
}

/**
 * Serves an embedded PGlite store over the PostgreSQL wire protocol, so that other processes
 * (the CLI, a worker, psql) use it while this process keeps it open.
 *
 * PGlite is one session. A client gets it exclusively (`acquireSession`: also excluding this
 * process's own statements) from its first message until the backend answers ReadyForQuery with
 * status idle — so an extended-protocol sequence (Parse/Bind/Describe/Execute/Sync) or a whole
 * transaction is never interleaved with anybody else's statements. What one session cannot keep
 * apart is handled here: prepared statement names are prefixed per connection (and closed when it
 * ends); LISTEN and UNLISTEN are answered here and kept in the store's {@link NotificationHub};
 * notifications found in a client's answer are taken out of it and delivered to whoever
 * subscribed; a client that goes away leaves no open transaction (Sync, then ROLLBACK unless idle).
 */
export async function serveWireBridge(store: PGliteStore, options: WireBridgeOptions = {}): Promise<WireBridge> {
  const settings = await sql<Record<string, string>>`SELECT ${sql.join(
    REPORTED_SETTINGS.map((name) => sql`current_setting(${name}) AS ${sql.ref(name)}`),
  )}`.execute(store.db);
  const startupAnswer = Buffer.concat([
    authenticationOk(),
    ...REPORTED_SETTINGS.map((name) => parameterStatus(name, settings.rows[0]![name] ?? '')),
    parameterStatus('application_name', ''),
  ]);
  const connections = new Set<BridgeConnection>();
  let nextId = 0;
  const server: Server = createServer((socket) => {
    const connection = new BridgeConnection(socket, FIRST_PID + nextId++, store, startupAnswer);
    connections.add(connection);
    void connection.ended.then(() => connections.delete(connection));
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the dev server did not get a TCP port');
  return {
    url: `postgres://postgres@${host}:${address.port}/postgres`,
    port: address.port,
    async close() {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const connection of connections) connection.destroy();
      await Promise.all([...connections].map((c) => c.ended));
      await stopped;
    },
  };
}

/**
 * One client connection. States: `startup` (SSL/GSS requests refused with 'N', a CancelRequest
 * closes the connection, the StartupMessage is answered here) → `ready` (messages run in order,
 * one at a time) → `closed` (cleanup: Sync, ROLLBACK unless idle, close the connection's
 * statements, drop its subscriptions; then `ended` resolves). Holding the session is orthogonal:
 * taken at the first message that needs PGlite, released at ReadyForQuery 'I'.
 */
class BridgeConnection {
  #state: 'startup' | 'ready' | 'closed' = 'startup';
  #buffer: Buffer = Buffer.alloc(0);
  /** Messages run one after another; cleanup runs after the last. */
  #work: Promise<void> = Promise.resolve();
  #session: ExclusiveSession | undefined;
  #status: TransactionStatus = 'I';
  /** Named statements (renamed) this connection prepared in the shared session. */
  readonly #statements = new Set<string>();
  readonly #subscriptions = new Map<string, () => void>();
  readonly ended: Promise<void>;

  constructor(
    private readonly socket: Socket,
    private readonly pid: number,
    private readonly store: PGliteStore,
    private readonly startupAnswer: Buffer,
  ) {
    socket.setNoDelay(true);
    let ended!: () => void;
    this.ended = new Promise((resolve) => (ended = resolve));
    socket.on('data', (chunk: Buffer) => this.#receive(chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      this.#state = 'closed';
      this.#work = this.#work.then(() => this.#cleanUp()).finally(ended);
    });
  }

  destroy(): void {
    this.socket.destroy();
  }

  #receive(chunk: Buffer): void {
    if (this.#state === 'closed') return;
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    if (this.#state === 'startup' && !this.#startup()) return;
    const { messages, rest } = splitMessages(this.#buffer);
    this.#buffer = rest;
    for (const msg of messages) {
      this.#work = this.#work.then(() => (this.#state === 'ready' ? this.#handle(msg) : undefined));
    }
    this.#work = this.#work.catch((error: unknown) => {
      // PGlite failed outside the protocol (not an ErrorResponse): this connection cannot go on.
      this.#write(
        errorResponse('XX000', `ledgerflow dev server: ${error instanceof Error ? error.message : String(error)}`),
      );
      this.socket.destroy();
    });
  }

  /** Consumes startup packets; true once the StartupMessage has been answered. */
  #startup(): boolean {
    while (this.#buffer.length >= 8) {
      const length = this.#buffer.readInt32BE(0);
      const code = this.#buffer.readInt32BE(4);
      if (this.#buffer.length < length) return false;
      this.#buffer = this.#buffer.subarray(length);
      if (code === SSL_REQUEST_CODE || code === GSSENC_REQUEST_CODE) {
        this.#write(Buffer.from('N'));
      } else if (code === CANCEL_REQUEST_CODE) {
        // PGlite runs each message to its end before answering: there is nothing to interrupt.
        this.socket.end();
        return false;
      } else if (code === PROTOCOL_V3) {
        this.#write(
          Buffer.concat([this.startupAnswer, backendKeyData(this.pid, randomInt(2 ** 31)), readyForQuery('I')]),
        );
        this.#state = 'ready';
        return true;
      } else {
        this.#write(errorResponse('08P01', `unsupported frontend protocol or request code ${code}`));
        this.socket.end();
        return false;
      }
    }
    return false;
  }

  async #handle(msg: WireMessage): Promise<void> {
    switch (msg.type) {
      case 'X':
        this.socket.end();
        return;
      case 'Q': {
        const listen = LISTEN_STATEMENT.exec(queryText(msg));
        if (listen !== null) return this.#listen(listen[1]!.toUpperCase() as 'LISTEN' | 'UNLISTEN', listen[2]!);
        return this.#run(msg.bytes);
      }
      case 'P':
      case 'B':
      case 'D':
      case 'C':
        return this.#run(
          renameStatements(msg, (kind, name) => {
            const renamed = `lf_dev${this.pid}_${name}`;
            if (kind === 'S' && msg.type === 'P') this.#statements.add(renamed);
            if (kind === 'S' && msg.type === 'C') this.#statements.delete(renamed);
            return renamed;
          }),
        );
      default:
        return this.#run(msg.bytes);
    }
  }

  /** Runs `bytes` on the session (taking it first), forwards the answer, notifications aside. */
  async #run(bytes: Buffer): Promise<void> {
    const session = (this.#session ??= await this.store.acquireSession());
    const answer = await this.#exec(session, bytes);
    this.#write(answer);
  }

  /**
   * Runs `bytes` and returns the answer without its notifications, which go to their subscribers.
   * A ReadyForQuery 'I' releases the session unless `keep` (the cleanup's several messages).
   */
  async #exec(session: ExclusiveSession, bytes: Buffer, keep = false): Promise<Buffer> {
    const chunks: Buffer[] = [];
    // PGlite may reuse the memory it hands out: copy.
    await session.exec(bytes, (data) => chunks.push(Buffer.from(data)));
    const { messages } = splitMessages(Buffer.concat(chunks));
    const kept: Buffer[] = [];
    const notifications: Array<{ channel: string; payload: string }> = [];
    let ready = false;
    for (const msg of messages) {
      if (msg.type === 'A') notifications.push(notification(msg.bytes));
      else kept.push(msg.bytes);
      if (msg.type === 'Z') {
        ready = true;
        this.#status = transactionStatus(msg);
      }
    }
    if (ready && this.#status === 'I' && !keep) {
      this.#session = undefined;
      session.release();
    }
    for (const { channel, payload } of notifications) this.store.notifications.dispatch(channel, payload);
    return Buffer.concat(kept);
  }

  async #listen(command: 'LISTEN' | 'UNLISTEN', name: string): Promise<void> {
    const channels =
      name === '*'
        ? [...this.#subscriptions.keys()]
        : [name.startsWith('"') ? name.slice(1, -1).replaceAll('""', '"') : name.toLowerCase()];
    for (const channel of channels) {
      if (command === 'UNLISTEN') {
        this.#subscriptions.get(channel)?.();
        this.#subscriptions.delete(channel);
      } else if (!this.#subscriptions.has(channel)) {
        const subscribing = this.store.notifications.subscribe(channel, (payload) =>
          this.#write(notificationResponse(this.pid, channel, payload)),
        );
        this.#subscriptions.set(channel, () => void subscribing.then((unsubscribe) => unsubscribe()).catch(() => {}));
        // Inside its own transaction this connection holds the session the LISTEN waits for; it
        // takes effect once that transaction ends, as PostgreSQL's LISTEN does at commit.
        if (this.#session === undefined) await subscribing;
      }
    }
    this.#write(
      Buffer.concat([commandComplete(command), readyForQuery(this.#session === undefined ? 'I' : this.#status)]),
    );
  }

  async #cleanUp(): Promise<void> {
    for (const unsubscribe of this.#subscriptions.values()) unsubscribe();
    this.#subscriptions.clear();
    if (this.#session === undefined && this.#statements.size === 0) return;
    const session = (this.#session ??= await this.store.acquireSession());
    // Ends an unfinished extended-protocol sequence and learns the transaction status; then no
    // transaction of a client that is gone may stay open (its locks would hold everyone).
    try {
      await this.#exec(session, syncMessage(), true);
      if (this.#status !== 'I') await this.#exec(session, queryMessage('ROLLBACK'), true);
      if (this.#statements.size > 0) {
        await this.#exec(
          session,
          Buffer.concat([...[...this.#statements].map(closeStatementMessage), syncMessage()]),
          true,
        );
        this.#statements.clear();
      }
    } finally {
      this.#session = undefined;
      session.release();
    }
  }

  #write(bytes: Buffer): void {
    if (bytes.length > 0 && this.socket.writable) this.socket.write(bytes);
  }
}
