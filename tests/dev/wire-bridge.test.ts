import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { serveWireBridge, type WireBridge } from '../../runtime/dev/wire-bridge.js';
import { message, splitMessages, syncMessage, type WireMessage } from '../../runtime/dev/wire-protocol.js';
import { createPGliteStore, type PGliteStore } from '../../runtime/store/pglite/pglite-store.js';
import { waitUntil } from '../runtime/fixtures/run-helpers.js';

/**
 * The dev server's bridge: several `pg` connections and this process's own statements share the
 * one PGlite session without seeing each other's half-finished work.
 */
let store: PGliteStore;
let bridge: WireBridge;
const clients: pg.Client[] = [];

async function client(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: bridge.url });
  c.on('error', () => {});
  await c.connect();
  clients.push(c);
  return c;
}

/** Resolves `promise`'s settled state after `rounds` round trips of `other`: no timing involved. */
async function stillPendingAfter(promise: Promise<unknown>, other: pg.Client, rounds = 5): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < rounds; i++) await other.query('SELECT 1');
  return !settled;
}

/** A wire-protocol client sending exactly the messages a test gives it, e.g. a Parse without a Sync. */
async function rawClient(): Promise<{
  send(...messages: Buffer[]): void;
  until(type: string): Promise<WireMessage[]>;
  close(): void;
}> {
  const socket = connect(bridge.port, '127.0.0.1');
  let buffered = Buffer.alloc(0);
  let received: WireMessage[] = [];
  let wake = (): void => {};
  socket.on('data', (chunk: Buffer) => {
    const { messages, rest } = splitMessages(Buffer.concat([buffered, chunk]));
    buffered = Buffer.from(rest);
    received.push(...messages);
    wake();
  });
  const until = async (type: string): Promise<WireMessage[]> => {
    while (!received.some((m) => m.type === type)) await new Promise<void>((resolve) => (wake = resolve));
    const at = received.findIndex((m) => m.type === type);
    const taken = received.slice(0, at + 1);
    received = received.slice(at + 1);
    return taken;
  };
  await new Promise<void>((resolve) => socket.on('connect', resolve));
  const params = Buffer.from('user\0postgres\0\0');
  const startup = Buffer.alloc(8);
  startup.writeInt32BE(8 + params.length, 0);
  startup.writeInt32BE(196_608, 4);
  socket.write(Buffer.concat([startup, params]));
  await until('Z');
  return { send: (...messages) => socket.write(Buffer.concat(messages)), until, close: () => socket.destroy() };
}

const cstrings = (...texts: string[]): Buffer => Buffer.from(texts.map((t) => `${t}\0`).join(''));
const int16s = (...values: number[]): Buffer => Buffer.from(values.flatMap((v) => [v >> 8, v & 0xff]));

beforeAll(async () => {
  store = await createPGliteStore();
  await sql`CREATE TABLE item (id int PRIMARY KEY, owner text NOT NULL)`.execute(store.db);
  bridge = await serveWireBridge(store);
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.end().catch(() => {})));
  await sql`TRUNCATE item`.execute(store.db);
});

afterAll(async () => {
  await bridge?.close();
  await store?.close();
});

describe('dev server bridge', () => {
  it('keeps extended-protocol queries of two connections apart, named statements included', async () => {
    const [a, b] = [await client(), await client()];
    // pg pipelines Parse/Bind/Describe/Execute/Sync; both connections send at once. Each text names
    // its connection, so a Bind that met the other connection's Parse would answer with its name;
    // both prepare a statement under the same name, with different texts (each connection's own, as on PostgreSQL).
    const queries = Array.from({ length: 60 }, (_, i) => {
      const [on, who] = i % 2 === 0 ? [a, 'a'] : [b, 'b'];
      const text = `SELECT $1::int AS n, '${who}'::text AS who`;
      return on.query(i % 4 < 2 ? { name: 'same_name', text, values: [i] } : { text, values: [i] });
    });
    const results = await Promise.all(queries);
    expect(results.map((r) => r.rows[0])).toEqual(
      Array.from({ length: 60 }, (_, i) => ({ n: i, who: i % 2 === 0 ? 'a' : 'b' })),
    );
  });

  it('gives a connection the session from its first message to ReadyForQuery: an unfinished extended query is not interleaved', async () => {
    const a = await rawClient();
    // Parse of the unnamed statement, then Flush: no Sync, so the sequence is still open.
    a.send(message('P', Buffer.concat([cstrings('', "SELECT 'a'::text AS who"), int16s(0)])), message('H'));
    await a.until('1');
    // Another connection's query (its own unnamed statement) must wait for a's Sync...
    const b = await client();
    const fromB = b.query<{ who: string }>('SELECT $1::text AS who', ['b']);
    await new Promise((resolve) => setTimeout(resolve, 100));
    // ...so that a's Bind still finds a's statement.
    a.send(
      message('B', Buffer.concat([cstrings('', ''), int16s(0, 0, 0)])),
      message('E', Buffer.concat([cstrings(''), Buffer.alloc(4)])),
      syncMessage(),
    );
    const answer = await a.until('Z');
    expect(answer.map((m) => m.type)).toEqual(['2', 'D', 'C', 'Z']);
    expect(answer[1]!.bytes.toString('utf8', 11)).toBe('a');
    expect((await fromB).rows).toEqual([{ who: 'b' }]);
    a.close();
  });

  it('gives a connection in a transaction the session until it ends: other connections and in-process statements wait', async () => {
    const [a, b] = [await client(), await client()];
    await a.query('BEGIN');
    await a.query('INSERT INTO item VALUES (1, $1)', ['a']);
    const fromB = b.query<{ n: string }>('SELECT count(*) AS n FROM item');
    const inProcess = sql<{ n: number }>`SELECT count(*)::int AS n FROM item`.execute(store.db);
    expect(await stillPendingAfter(fromB, a)).toBe(true);
    expect(await stillPendingAfter(inProcess, a)).toBe(true);
    // The transaction sees only its own work, never the waiting statements'.
    expect((await a.query('SELECT owner FROM item')).rows).toEqual([{ owner: 'a' }]);
    await a.query('COMMIT');
    expect((await fromB).rows).toEqual([{ n: '1' }]);
    expect((await inProcess).rows).toEqual([{ n: 1 }]);
  });

  it('rolls back the transaction of a client killed in the middle of it, and lets the others go on', async () => {
    const b = await client();
    const script = `
      const pg = require('pg');
      const c = new pg.Client({ connectionString: process.argv[1] });
      c.connect()
        .then(() => c.query('BEGIN'))
        .then(() => c.query('INSERT INTO item VALUES (7, $1)', ['killed']))
        .then(() => process.stdout.write('inside\\n'));`;
    const child = spawn(process.execPath, ['-e', script, bridge.url], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('inside') && resolve()),
    );
    // Waits for the session, which the child's transaction holds until the bridge rolls it back.
    const waiting = b.query<{ n: string }>('SELECT count(*) AS n FROM item');
    child.kill('SIGKILL');
    expect((await waiting).rows).toEqual([{ n: '0' }]);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM item`.execute(store.db);
    expect(rows).toEqual([{ n: 0 }]);
    // No transaction is left open in the session: a new one starts without a warning.
    const notices: string[] = [];
    b.on('notice', (notice) => notices.push(notice.message ?? ''));
    await b.query('BEGIN');
    await b.query('ROLLBACK');
    expect(notices).toEqual([]);
  });

  it('delivers NOTIFY to every subscriber, in process and over the bridge, whoever commits it', async () => {
    const [a, b, c] = [await client(), await client(), await client()];
    const heard: string[] = [];
    for (const [name, on] of [
      ['a', a],
      ['b', b],
    ] as const) {
      on.on('notification', (n) => heard.push(`${name}:${n.channel}:${n.payload}`));
      await on.query('LISTEN "lf_test"');
    }
    const unlisten = await store.listen('lf_test', (payload) => heard.push(`in-process:lf_test:${payload}`));
    await c.query("SELECT pg_notify('lf_test', 'from-c')");
    await sql`SELECT pg_notify('lf_test', 'from-process')`.execute(store.db);
    await waitUntil('six notifications', () => heard.length >= 6);
    expect(heard.sort()).toEqual(
      [
        'a:lf_test:from-c',
        'a:lf_test:from-process',
        'b:lf_test:from-c',
        'b:lf_test:from-process',
        'in-process:lf_test:from-c',
        'in-process:lf_test:from-process',
      ].sort(),
    );
    // One connection's UNLISTEN (and another's going away) silences nobody else.
    await a.query('UNLISTEN "lf_test"');
    await b.end();
    heard.length = 0;
    await c.query("SELECT pg_notify('lf_test', 'after')");
    await waitUntil('the in-process listener', () => heard.length >= 1);
    expect(heard).toEqual(['in-process:lf_test:after']);
    await unlisten();
  });

  it("answers SSLRequest with 'N' and closes a CancelRequest's connection", async () => {
    const request = (code: number, length: number): Promise<{ data: string; closed: boolean }> =>
      new Promise((resolve) => {
        const socket = connect(bridge.port, '127.0.0.1');
        const packet = Buffer.alloc(length);
        packet.writeInt32BE(length, 0);
        packet.writeInt32BE(code, 4);
        let data = '';
        socket.on('connect', () => socket.write(packet));
        socket.on('data', (chunk: Buffer) => {
          data += chunk.toString('latin1');
          socket.destroy();
        });
        socket.on('close', () => resolve({ data, closed: true }));
      });
    expect(await request(80_877_103, 8)).toEqual({ data: 'N', closed: true });
    expect(await request(80_877_102, 16)).toEqual({ data: '', closed: true });
  });
});
