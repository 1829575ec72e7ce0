import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepared, PREPARED_MARK } from '../../runtime/store/prepared.js';
import { openStore } from '../../runtime/store/open-store.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { statementNamer } from '../../runtime/store/pg/statement-names.js';
import { SQLSTATE, sqlStateOf } from '../../runtime/store/sqlstate.js';
import type { Store } from '../../runtime/store/store.js';
import { describeStores } from '../support/describe-stores.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { claimParts, FUSED_CLAIM, reusedClaimParts } from '../../runtime/worker/claim.js';

const lookup = (db: Kysely<unknown>, id: number) =>
  sql<{ id: number; doc: unknown }>`SELECT id, doc FROM public.prep_t WHERE id = ${id}`.execute(db);
const preparedLookup = (db: Kysely<unknown>, id: number) =>
  prepared(sql<{ id: number; doc: unknown }>`SELECT id, doc FROM public.prep_t WHERE id = ${id}`).execute(db);

describeStores('a statement marked prepared()', (getStore) => {
  beforeAll(async () => {
    await sql`CREATE TABLE public.prep_t (id int8 PRIMARY KEY, doc jsonb)`.execute(getStore().db);
    await sql`INSERT INTO public.prep_t VALUES (1, '{"a": 1}'), (2, '[2]')`.execute(getStore().db);
  });

  it('returns what the same statement unmarked returns, every time it runs', async () => {
    const db = getStore().db as Kysely<unknown>;
    for (const id of [1, 2, 1, 3]) {
      expect((await preparedLookup(db, id)).rows).toEqual((await lookup(db, id)).rows);
    }
    expect((await preparedLookup(db, 2)).rows).toEqual([{ id: 2, doc: [2] }]);
  });

  it('fails as the unmarked statement does, and runs again afterwards', async () => {
    const db = getStore().db as Kysely<unknown>;
    const insert = (id: number) => prepared(sql`INSERT INTO public.prep_t (id) VALUES (${id})`).execute(db);
    await insert(10);
    expect(sqlStateOf(await insert(10).catch((e: unknown) => e))).toBe(SQLSTATE.UNIQUE_VIOLATION);
    await insert(11);
    expect((await preparedLookup(db, 11)).rows).toEqual([{ id: 11, doc: null }]);
  });
});

describe('named statements on the pg store', () => {
  let test: TestStore;
  beforeAll(async () => {
    test = await createPgTestStore();
    await sql`CREATE TABLE public.prep_t (id int8 PRIMARY KEY, doc jsonb)`.execute(test.db);
  });
  afterAll(async () => {
    await test.close();
  });

  /** The statements the one connection of a one-connection store has prepared. */
  async function preparedOn(store: Store): Promise<Array<{ name: string; statement: string }>> {
    const { rows } = await sql<{
      name: string;
      statement: string;
    }>`SELECT name, statement FROM pg_prepared_statements ORDER BY name`.execute(store.db);
    return rows;
  }

  it('prepares a marked text once per connection under a digest of it, and nothing unmarked', async () => {
    const store = createPgStore({ connectionString: test.url!, maxConnections: 1 });
    try {
      const db = store.db as Kysely<unknown>;
      for (const id of [1, 2, 3]) {
        await preparedLookup(db, id);
        await lookup(db, id);
      }
      const statements = await preparedOn(store);
      expect(statements).toHaveLength(1);
      expect(statements[0]!.name).toMatch(/^lf_[0-9a-f]{24}$/);
      expect(statements[0]!.statement.startsWith(PREPARED_MARK)).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('answers a marked statement with what a client class answers itself (its own promise, no callback)', async () => {
    // A clientClass may refuse a query by returning a rejected promise without calling the
    // query back (tests/property's severed client does): the statement must reject, not hang.
    let refusing = false;
    class Refusing extends pg.Client {}
    const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
    Refusing.prototype.query = function query(this: pg.Client, ...args: unknown[]) {
      if (refusing) return Promise.reject(new Error('refused by the client class'));
      return original.apply(this, args);
    } as typeof original as typeof pg.Client.prototype.query;
    const store = createPgStore({ connectionString: test.url!, maxConnections: 1, clientClass: Refusing });
    try {
      const db = store.db as Kysely<unknown>;
      expect((await preparedLookup(db, 1)).rows).toEqual([]);
      refusing = true;
      await expect(preparedLookup(db, 1)).rejects.toThrow('refused by the client class');
      refusing = false;
      expect((await preparedLookup(db, 1)).rows).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('prepares nothing behind a transaction pooler (pooler), unless preparedStatements: true says it keeps them', async () => {
    const pooled = createPgStore({ connectionString: test.url!, maxConnections: 1, pooler: { mode: 'transaction' } });
    const told = createPgStore({
      connectionString: test.url!,
      maxConnections: 1,
      pooler: { mode: 'transaction' },
      preparedStatements: true,
    });
    try {
      await preparedLookup(pooled.db as Kysely<unknown>, 1);
      expect(await preparedOn(pooled)).toEqual([]);
      await preparedLookup(told.db as Kysely<unknown>, 1);
      expect(await preparedOn(told)).toHaveLength(1);
    } finally {
      await pooled.close();
      await told.close();
    }
  });

  it('prepares nothing with openStore({ preparedStatements: false })', async () => {
    const store = await openStore({ databaseUrl: test.url!, maxConnections: 1, preparedStatements: false });
    try {
      await preparedLookup(store.db as Kysely<unknown>, 1);
      expect(await preparedOn(store)).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

describe('statementNamer', () => {
  it('names marked texts by their digest, alike across namers, and leaves unmarked ones alone', () => {
    const a = statementNamer();
    const b = statementNamer();
    const text = `${PREPARED_MARK} SELECT $1`;
    expect(a(text)).toMatch(/^lf_[0-9a-f]{24}$/);
    expect(a(text)).toBe(b(text));
    expect(a(`${PREPARED_MARK} SELECT $2`)).not.toBe(a(text));
    expect(a('SELECT $1')).toBeUndefined();
  });

  it('names no new text past its bound, and keeps the names it gave', () => {
    const name = statementNamer(2);
    const first = name(`${PREPARED_MARK} SELECT 1`);
    expect(name(`${PREPARED_MARK} SELECT 2`)).toBeDefined();
    expect(name(`${PREPARED_MARK} SELECT 3`)).toBeUndefined();
    expect(name(`${PREPARED_MARK} SELECT 1`)).toBe(first);
  });
});

describe('reusedClaimParts', () => {
  it('builds the claim once per placement, registry and options, and builds what claimParts builds', () => {
    const registry = buildRegistry([]);
    const options = { workerId: 'w', leaseMs: 30_000, limit: 4 };
    const parts = reusedClaimParts(registry, options, FUSED_CLAIM);
    expect(reusedClaimParts(registry, { ...options }, FUSED_CLAIM)).toBe(parts);
    expect(reusedClaimParts(registry, { ...options, limit: 5 }, FUSED_CLAIM)).not.toBe(parts);
    expect(reusedClaimParts(registry, options)).not.toBe(parts);
    expect(reusedClaimParts(buildRegistry([]), options, FUSED_CLAIM)).not.toBe(parts);
    const db = new Kysely<unknown>({
      dialect: {
        createAdapter: () => new PostgresAdapter(),
        createDriver: () => new DummyDriver(),
        createIntrospector: (k) => new PostgresIntrospector(k),
        createQueryCompiler: () => new PostgresQueryCompiler(),
      },
    });
    const compile = (p: typeof parts) => sql`WITH fenced AS (SELECT 1), ${p.ctes} ${p.select}`.compile(db);
    const fresh = compile(claimParts(registry, options, FUSED_CLAIM));
    const reused = compile(parts);
    expect(reused.sql).toBe(fresh.sql);
    expect(reused.parameters).toEqual(fresh.parameters);
  });
});
