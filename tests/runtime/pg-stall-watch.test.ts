import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../runtime/store/open-store.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import type { Store } from '../../runtime/store/store.js';
import { isConnectionError } from '../../runtime/store/connection-errors.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';

/**
 * A statement on a connection whose far end went silent (stall-watch.ts): without the watch it
 * waits for TCP to give up, minutes; with it, the store asks the host over a fresh connection and
 * ends the connection if the host cannot be reached or no longer has the backend. The network is
 * a relay in front of the test server that the test stalls: connections stay open, nothing passes.
 */
describe('statements on a connection whose host went silent [pg]', () => {
  let base: TestStore;
  let server: URL;
  const stores: Store[] = [];
  const relays: Relay[] = [];
  const openVia = async (relay: Relay, stalledStatementCheckMs: number): Promise<Store> => {
    // Through openStore, the public entry: its options must reach the PostgreSQL store.
    const store = await openStore({
      databaseUrl: `postgres://postgres@127.0.0.1:${relay.port}${server.pathname}?connect_timeout=2`,
      maxConnections: 2,
      stalledStatementCheckMs,
    });
    stores.push(store);
    return store;
  };
  const relay = async (): Promise<Relay> => {
    const r = await startRelay(Number(server.port));
    relays.push(r);
    return r;
  };
  const pid = async (store: Store): Promise<number> =>
    (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(store.db)).rows[0]!.pid;
  const settled = (promise: Promise<unknown>): Promise<{ error?: unknown; ms: number }> => {
    const started = Date.now();
    return promise.then(
      () => ({ ms: Date.now() - started }),
      (error: unknown) => ({ error, ms: Date.now() - started }),
    );
  };

  beforeAll(async () => {
    base = await createPgTestStore();
    server = new URL(base.url!);
  });
  afterAll(async () => {
    await Promise.all(relays.map((r) => r.close()));
    await Promise.all(stores.map((s) => s.close().catch(() => {})));
    await base.close();
  });

  it('ends a statement whose host stopped answering altogether, as a lost connection, within a check and a probe', async () => {
    const r = await relay();
    const store = await openVia(r, 1_000);
    await pid(store);
    const sleeping = settled(sql`SELECT pg_sleep(60)`.execute(store.db));
    await new Promise((resolve) => setTimeout(resolve, 200));
    r.stall({ newConnections: 'held' });
    const { error, ms } = await sleeping;
    expect(isConnectionError(error)).toBe(true);
    expect(ms).toBeLessThan(15_000);
  });

  it('ends a statement whose backend is gone while its own connection went silent, the host still answering', async () => {
    const r = await relay();
    const store = await openVia(r, 1_000);
    const backend = await pid(store);
    const sleeping = settled(sql`SELECT pg_sleep(60)`.execute(store.db));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The connection is black-holed, then its backend ends: the FATAL it sends never arrives.
    r.stall({ newConnections: 'forwarded' });
    await sql`SELECT pg_terminate_backend(${backend})`.execute(base.db);
    const { error, ms } = await sleeping;
    expect(isConnectionError(error)).toBe(true);
    expect(ms).toBeLessThan(15_000);
    // The store goes on over a new connection.
    expect(await pid(store)).not.toBe(backend);
  });

  it('ends a statement whose answer was lost on a silent connection, its backend alive and idle', async () => {
    const r = await relay();
    const store = await openVia(r, 1_000);
    const backend = await pid(store);
    const sleeping = settled(within(15_000, sql`SELECT pg_sleep(0.5)`.execute(store.db)));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Only this connection is black-holed: the backend finishes the statement and its answer is lost.
    r.stall({ newConnections: 'forwarded' });
    const { error, ms } = await sleeping;
    expect(isConnectionError(error)).toBe(true);
    // A check after 1 s of statement, then 1 s of backend idleness at most; far from the 15 s cap.
    expect(ms).toBeLessThan(8_000);
    expect(String((error as Error).message)).toMatch(/has been idle for over 1000 ms/);
    // The backend was there all along (the relay still holds its socket), and the store goes on.
    expect(await pid(store)).not.toBe(backend);
  });

  it('ends a statement that never reached its backend over a silent connection', async () => {
    const r = await relay();
    const store = await openVia(r, 1_000);
    await pid(store);
    r.stall({ newConnections: 'forwarded' });
    const { error, ms } = await settled(within(15_000, sql`SELECT 1`.execute(store.db)));
    expect(isConnectionError(error)).toBe(true);
    expect(ms).toBeLessThan(8_000);
  });

  it('leaves a long statement alone while its backend is there', async () => {
    const r = await relay();
    const store = await openVia(r, 300);
    const { error, ms } = await settled(sql`SELECT pg_sleep(2)`.execute(store.db));
    expect(error).toBeUndefined();
    expect(ms).toBeGreaterThanOrEqual(1_900);
  });

  it('gives up connecting to a silent host after openStore({ connectTimeoutMs })', async () => {
    const r = await relay();
    r.stall({ newConnections: 'held' });
    const store = await openStore({
      databaseUrl: `postgres://postgres@127.0.0.1:${r.port}${server.pathname}`,
      connectTimeoutMs: 1_000,
    });
    stores.push(store);
    const { error, ms } = await settled(within(15_000, pid(store)));
    expect(isConnectionError(error)).toBe(true);
    expect((error as { code?: string }).code).toBe('ETIMEDOUT');
    expect(ms).toBeLessThan(5_000);
  });

  it('refuses a stalledStatementCheckMs that is not a whole number of milliseconds', () => {
    expect(() => createPgStore({ connectionString: base.url!, stalledStatementCheckMs: 1.5 })).toThrow(
      'stalledStatementCheckMs must be a whole number of milliseconds >= 0 (got 1.5).',
    );
  });
});

/** `promise`, or a plain (not connection) error after `ms`: an old watch that never ends the statement fails the test, not its timeout. */
function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms).unref()),
  ]);
}

interface Relay {
  readonly port: number;
  /** Existing connections stop passing anything (both ways) and stay open; new ones are held the same way, or forwarded. */
  stall(options: { readonly newConnections: 'held' | 'forwarded' }): void;
  close(): Promise<void>;
}

async function startRelay(upstreamPort: number): Promise<Relay> {
  const pairs = new Set<{ down: Socket; up: Socket }>();
  const held = new Set<Socket>();
  let newConnections: 'held' | 'forwarded' = 'forwarded';
  const server = createServer((down) => {
    down.on('error', () => {});
    if (newConnections === 'held') {
      held.add(down);
      return;
    }
    const up = connect(upstreamPort, '127.0.0.1');
    up.on('error', () => down.destroy());
    const pair = { down, up };
    pairs.add(pair);
    down.pipe(up);
    up.pipe(down);
    const end = (): void => {
      pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    down.on('close', end);
    up.on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as AddressInfo).port,
    stall(options) {
      newConnections = options.newConnections;
      for (const { down, up } of pairs) {
        down.unpipe(up);
        up.unpipe(down);
        down.pause();
        up.pause();
        held.add(down);
        held.add(up);
        down.removeAllListeners('close');
        up.removeAllListeners('close');
      }
      pairs.clear();
    },
    close() {
      for (const { down, up } of pairs) {
        down.destroy();
        up.destroy();
      }
      for (const socket of held) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
