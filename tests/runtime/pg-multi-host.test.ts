import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { ConnectTimeoutError, createPgStore } from '../../runtime/store/pg/pg-store.js';
import { SQLSTATE, sqlStateOf } from '../../runtime/store/sqlstate.js';
import type { Store } from '../../runtime/store/store.js';
import { isConnectionError } from '../../runtime/store/connection-errors.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';

/**
 * A multi-host URL on one real server: port 1 on localhost is the host that is down, and the
 * test database is made read-only (`ALTER DATABASE … SET default_transaction_read_only`) to
 * play a standby. The failover itself, with a real standby promoted, is tests/failover.
 */
describe('a PostgreSQL store on a multi-host URL', () => {
  let base: TestStore;
  let url: URL;
  let database: string;
  const stores: Store[] = [];
  const open = (query = '', maxConnections = 2): Store => {
    const store = createPgStore({
      connectionString: `postgres://postgres@127.0.0.1:1,${url.host}/${database}${query}`,
      maxConnections,
    });
    stores.push(store);
    return store;
  };
  const setReadOnly = async (on: boolean): Promise<void> => {
    await sql
      .raw(
        `ALTER DATABASE ${database} ${on ? 'SET default_transaction_read_only = on' : 'RESET default_transaction_read_only'}`,
      )
      .execute(base.db);
  };
  const pid = async (store: Store): Promise<number> =>
    (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(store.db)).rows[0]!.pid;

  beforeAll(async () => {
    base = await createPgTestStore();
    url = new URL(base.url!);
    database = url.pathname.slice(1);
    await sql`CREATE TABLE public.mh_t (id int PRIMARY KEY)`.execute(base.db);
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await base.close();
  });

  it('skips a host that is down and writes to the next one', async () => {
    const store = open();
    expect(store.location).toBe(`PostgreSQL at 127.0.0.1:1,${url.host}/${database} (read-write)`);
    await sql`INSERT INTO public.mh_t VALUES (1)`.execute(store.db);
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM public.mh_t`.execute(base.db)).rows[0]!.n).toBe(1);
  });

  it('listens and hears notifications on the writable host', async () => {
    const store = open();
    const heard: string[] = [];
    const unlisten = await store.listen('mh_channel', (payload) => heard.push(payload));
    await sql`SELECT pg_notify('mh_channel', 'hello')`.execute(base.db);
    for (let i = 0; i < 50 && heard.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    await unlisten();
    expect(heard).toEqual(['hello']);
  });

  it('refuses read-only hosts, naming what each host answered, and connects once one accepts writes', async () => {
    await setReadOnly(true);
    try {
      const store = open();
      const error = await sql`SELECT 1`.execute(store.db).catch((e: unknown) => e as Error);
      expect(error).toMatchObject({ name: 'NoWritableHostError', code: 'ENOWRITABLEHOST' });
      expect((error as Error).message).toMatch(
        /127\.0\.0\.1:1 did not answer .*; 127\.0\.0\.1:\d+ is read-only \(default_transaction_read_only is on\)/,
      );
      // The worker treats it as the database being unreachable: it waits and retries.
      expect(isConnectionError(error)).toBe(true);
      // target_session_attrs=any takes the first host that answers, read-only or not.
      const any = open('?target_session_attrs=any');
      expect(
        (await sql<{ transaction_read_only: string }>`SHOW transaction_read_only`.execute(any.db)).rows[0]!
          .transaction_read_only,
      ).toBe('on');
    } finally {
      await setReadOnly(false);
    }
  });

  it('drops a connection whose host turned read-only, and forgets the host until it accepts writes again', async () => {
    const store = open('', 1);
    const first = await pid(store);
    expect(await pid(store)).toBe(first); // pooled: the same connection
    // The host is demoted under an open connection: the server reports the setting, and that
    // connection is closed on release instead of being pooled again.
    await setReadOnly(true);
    try {
      await sql`SET default_transaction_read_only = on`.execute(store.db);
      // The host is forgotten with it: the next connection probes every host, and none accepts writes.
      expect(await sql`SELECT 1`.execute(store.db).catch((e: unknown) => e)).toMatchObject({
        name: 'NoWritableHostError',
      });
    } finally {
      await setReadOnly(false);
    }
    const second = await pid(store);
    expect(second).not.toBe(first);
    await sql`INSERT INTO public.mh_t VALUES (2)`.execute(store.db);
  });

  it('does not keep a remembered host that became read-only while no connection was open to hear it', async () => {
    const store = open('', 1);
    await pid(store);
    // Gets the pooled connection closed (a write refused as read-only, below) without the host being forgotten.
    await store.db
      .transaction()
      .setAccessMode('read only')
      .execute((trx) => sql`INSERT INTO public.mh_t VALUES (4)`.execute(trx))
      .catch(() => {});
    await setReadOnly(true);
    try {
      // The new connection goes to the remembered host, finds it read-only and forgets it …
      expect(await sql`SELECT 1`.execute(store.db).catch((e: unknown) => e)).toMatchObject({
        name: 'ReadOnlyHostError',
      });
      // … so the next one probes every host.
      expect(await sql`SELECT 1`.execute(store.db).catch((e: unknown) => e)).toMatchObject({
        name: 'NoWritableHostError',
      });
    } finally {
      await setReadOnly(false);
    }
    await sql`SELECT 1`.execute(store.db);
  });

  it('drops a connection on which a write was refused as read-only (SQLSTATE 25006)', async () => {
    const store = open('', 1);
    const first = await pid(store);
    const refused = await store.db
      .transaction()
      .setAccessMode('read only')
      .execute((trx) => sql`INSERT INTO public.mh_t VALUES (3)`.execute(trx))
      .catch((e: unknown) => e);
    expect(sqlStateOf(refused)).toBe(SQLSTATE.READ_ONLY_SQL_TRANSACTION);
    expect(isConnectionError(refused)).toBe(true);
    expect(await pid(store)).not.toBe(first);
  });

  it('leaves a single-host URL to node-postgres, as before', async () => {
    const store = createPgStore({ connectionString: base.url!, maxConnections: 1 });
    stores.push(store);
    expect(store.location).toBe(`PostgreSQL at ${url.hostname}:${url.port}/${database}`);
    const client = new pg.Client({ connectionString: base.url! });
    await client.connect();
    await client.end();
    expect((await sql<{ n: number }>`SELECT 1 AS n`.execute(store.db)).rows[0]!.n).toBe(1);
  });

  it('gives up on a host that accepts TCP and then says nothing after connect_timeout, with a connection error', async () => {
    const silent = await startSilentHost();
    try {
      const store = createPgStore({
        connectionString: `postgres://postgres@127.0.0.1:${silent.port}/${database}?connect_timeout=2`,
        maxConnections: 1,
      });
      stores.push(store);
      const started = Date.now();
      const error = await sql`SELECT 1`.execute(store.db).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConnectTimeoutError);
      expect(isConnectionError(error)).toBe(true);
      expect((error as Error).message).toBe(
        `connecting to 127.0.0.1:${silent.port} took longer than 2000 ms (connect_timeout); the host is treated as unreachable`,
      );
      // Gave up at the limit, not at the operating system's TCP timeout (minutes).
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      await silent.close();
    }
  });

  it('moves on when the remembered writable host goes silent: its connection times out, the next host takes the writes', async () => {
    // Two ways to the one server: through a relay the test can freeze, then directly.
    const relay = await startSilentHost(Number(url.port));
    try {
      const store = createPgStore({
        connectionString: `postgres://postgres@127.0.0.1:${relay.port},${url.host}/${database}?target_session_attrs=read-write&connect_timeout=2`,
        maxConnections: 1,
      });
      stores.push(store);
      const viaRelay = await pid(store);
      const { rows } = await sql<{ port: number }>`SELECT inet_client_port() AS port`.execute(store.db);
      expect(relay.forwarded()).toContain(rows[0]!.port);
      // The host freezes: its open connection is cut, new ones are accepted and never answered.
      relay.freeze();
      await sql`SELECT pg_terminate_backend(${viaRelay})`.execute(base.db);
      const started = Date.now();
      let moved: number | undefined;
      for (let attempt = 0; attempt < 5 && moved === undefined; attempt++) {
        moved = await pid(store).catch((error: unknown) => {
          expect(isConnectionError(error)).toBe(true);
          return undefined;
        });
      }
      expect(moved).toBeDefined();
      expect(moved).not.toBe(viaRelay);
      expect(Date.now() - started).toBeLessThan(20_000);
      await sql`INSERT INTO public.mh_t VALUES (7)`.execute(store.db);
    } finally {
      await relay.close();
    }
  });
});

/**
 * A TCP host for connect timeouts: with `upstreamPort`, a relay to it until `freeze()`; after
 * that (or without one), it accepts connections and never sends a byte — a frozen machine, not a
 * closed port. `forwarded()` lists the relay's own ports towards the server (what the server sees
 * as the client port), to tell which connections went through it.
 */
async function startSilentHost(
  upstreamPort?: number,
): Promise<{ port: number; freeze(): void; forwarded(): number[]; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const forwarded: number[] = [];
  let frozen = upstreamPort === undefined;
  const server = createServer((downstream) => {
    sockets.add(downstream);
    downstream.on('error', () => {});
    downstream.on('close', () => sockets.delete(downstream));
    if (frozen) return;
    const upstream = connect(upstreamPort!, '127.0.0.1', () => forwarded.push(upstream.localPort!));
    sockets.add(upstream);
    upstream.on('error', () => downstream.destroy());
    upstream.on('close', () => {
      sockets.delete(upstream);
      downstream.destroy();
    });
    downstream.on('close', () => upstream.destroy());
    downstream.pipe(upstream);
    upstream.pipe(downstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as AddressInfo).port,
    freeze() {
      frozen = true;
      for (const socket of sockets) socket.destroy();
    },
    forwarded: () => forwarded,
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
