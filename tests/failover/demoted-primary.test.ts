import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import type { Store } from '../../runtime/store/store.js';
import { startPostgres, type PostgresServer } from '../support/postgres-server.js';

/**
 * A primary demoted while still up (made read-only by `ALTER SYSTEM SET
 * default_transaction_read_only` and a reload, as some failover tools do): a store on the
 * multi-host URL must leave it for the host that accepts writes, without a restart. Two
 * independent servers stand for the old and the new primary.
 */
let a: PostgresServer;
let b: PostgresServer;
let store: Store;

async function admin(server: PostgresServer, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

async function waitForReadOnly(server: PostgresServer): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const client = new pg.Client({ connectionString: server.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ default_transaction_read_only: string }>(
        'SHOW default_transaction_read_only',
      );
      if (rows[0]?.default_transaction_read_only === 'on') return;
    } finally {
      await client.end();
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`server on port ${server.port} did not turn read-only within 5 s of the reload`);
}

beforeAll(async () => {
  [a, b] = await Promise.all([startPostgres(), startPostgres()]);
  for (const server of [a, b]) await admin(server, 'CREATE TABLE public.demo (port int NOT NULL)');
  store = createPgStore({
    connectionString: `postgres://postgres@127.0.0.1:${a.port},127.0.0.1:${b.port}/postgres`,
    maxConnections: 2,
  });
});
afterAll(async () => {
  await store?.close();
  await Promise.all([a?.destroy(), b?.destroy()]);
});

it('leaves a primary that turned read-only while up, and writes to the host that accepts them', async () => {
  const write = async (): Promise<number | Error> => {
    try {
      const { rows } = await sql<{
        port: number;
      }>`INSERT INTO public.demo VALUES (inet_server_port()) RETURNING port`.execute(store.db);
      return rows[0]!.port;
    } catch (error) {
      return error as Error;
    }
  };
  expect(await write()).toBe(a.port);

  await admin(a, 'ALTER SYSTEM SET default_transaction_read_only = on');
  await admin(a, 'SELECT pg_reload_conf()');
  // pg_reload_conf() only signals the postmaster, which re-reads the file and then signals its
  // sessions; on a busy machine that can take a while. Once a new session sees the setting, the
  // postmaster has signalled every existing one too (it forks new sessions with what it read).
  await waitForReadOnly(a);
  // A session applies a reload between two statements, so a statement or two may still meet
  // the old primary (refused with 25006, or reported read-only); after that, all go to b.
  const outcomes: Array<number | string> = [];
  for (let i = 0; i < 10 && outcomes.at(-1) !== b.port; i++) {
    const outcome = await write();
    outcomes.push(outcome instanceof Error ? outcome.name : outcome);
  }
  expect(outcomes.at(-1), JSON.stringify(outcomes)).toBe(b.port);
  expect(outcomes.length, JSON.stringify(outcomes)).toBeLessThanOrEqual(4);
  for (let i = 0; i < 5; i++) expect(await write()).toBe(b.port);

  // LISTEN goes to b as well: a notification sent there is heard.
  const heard: string[] = [];
  const unlisten = await store.listen('demo_channel', (payload) => heard.push(payload));
  await admin(b, `NOTIFY demo_channel, 'on b'`);
  for (let i = 0; i < 50 && heard.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
  await unlisten();
  expect(heard).toEqual(['on b']);
}, 60_000);
