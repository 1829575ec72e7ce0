import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAbortedTransactionError, sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { StoreLockedError } from '../../runtime/errors.js';
import { createPGliteStore } from '../../runtime/store/pglite/pglite-store.js';
import { SQLSTATE, sqlStateOf } from '../../runtime/store/sqlstate.js';
import { describeStores } from '../support/describe-stores.js';
import { createPGliteTestStore } from '../support/test-stores.js';

describeStores('store drivers agree', (getStore) => {
  beforeAll(async () => {
    await sql`CREATE TABLE public.driver_t (id int8 PRIMARY KEY, doc jsonb, at timestamptz)`.execute(getStore().db);
  });

  it('parse int8 as number, jsonb as JSON and timestamptz as Date, with and without parameters', async () => {
    const db = getStore().db;
    await sql`INSERT INTO public.driver_t VALUES (${9_007_199_254_740_991}, ${JSON.stringify([1, { a: 'b' }])}, now())`.execute(
      db,
    );
    const withParams = await sql<{
      id: number;
      doc: unknown;
      at: Date;
    }>`SELECT * FROM public.driver_t WHERE id = ${9_007_199_254_740_991}`.execute(db);
    const without = await sql<{ id: number; doc: unknown; at: Date }>`SELECT * FROM public.driver_t`.execute(db);
    for (const row of [withParams.rows[0]!, without.rows[0]!]) {
      expect(row.id).toBe(9_007_199_254_740_991);
      expect(row.doc).toEqual([1, { a: 'b' }]);
      expect(row.at).toBeInstanceOf(Date);
    }
  });

  it('refuse an int8 a JavaScript number cannot hold exactly', async () => {
    await expect(sql`SELECT 9007199254740993::int8 AS big`.execute(getStore().db)).rejects.toThrow(
      'int8 value 9007199254740993 does not fit a JavaScript number',
    );
  });

  it('run several statements in one parameterless query (the simple protocol migrations use), returning no rows', async () => {
    const db = getStore().db;
    const { rows } =
      await sql`CREATE TABLE public.multi_t (n int); INSERT INTO public.multi_t VALUES (1), (2); SELECT 1`.execute(db);
    expect(rows).toEqual([]);
    const count = await sql<{ n: number }>`SELECT count(*)::int AS n FROM public.multi_t`.execute(db);
    expect(count.rows).toEqual([{ n: 2 }]);
  });

  it('put the SQLSTATE on errors', async () => {
    const db = getStore().db;
    await sql`INSERT INTO public.driver_t (id) VALUES (1)`.execute(db);
    const error = await sql`INSERT INTO public.driver_t (id) VALUES (${1})`.execute(db).catch((e: unknown) => e);
    expect(sqlStateOf(error)).toBe(SQLSTATE.UNIQUE_VIOLATION);
    expect(sqlStateOf(new Error('plain'))).toBeUndefined();
    expect(sqlStateOf(Object.assign(new Error('net'), { code: 'ECONNREFUSED' }))).toBeUndefined();
  });

  it('report a commit that PostgreSQL turned into a rollback, instead of losing the writes silently', async () => {
    const db = getStore().db;
    const error = await db
      .transaction()
      .execute(async (trx) => {
        await sql`INSERT INTO public.driver_t (id) VALUES (2)`.execute(trx);
        // A caught error still aborts the transaction on the server.
        await sql`INSERT INTO public.driver_t (id) VALUES (2)`.execute(trx).catch(() => undefined);
      })
      .catch((e: unknown) => e);
    expect(isAbortedTransactionError(error)).toBe(true);
    const { rows } = await sql`SELECT id FROM public.driver_t WHERE id = 2`.execute(db);
    expect(rows).toEqual([]);
  });
});

describe('PGlite data directory lock', () => {
  it('refuses a second opener while the first is open, and takes over a dead owner’s lock', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lf-lock-'));
    const dataDir = join(dir, 'db');
    try {
      const first = await createPGliteTestStore({ dataDir });
      const error = await createPGliteStore({ dataDir }).catch((e: unknown) => e as Error);
      expect(error).toBeInstanceOf(StoreLockedError);
      expect((error as Error).message).toBe(
        `The PGlite database at ${dataDir} is in use by process ${process.pid} (this process). PGlite allows one process at a time. ` +
          'Run `ledgerflow dev --workflows <module>` instead of that process: it runs the worker and the dashboard and serves ' +
          'this database to every other ledgerflow command. Or stop that process first, or use a PostgreSQL server ' +
          '(DATABASE_URL or --database-url).',
      );
      await first.close();
      expect(existsSync(`${dataDir}.lock`)).toBe(false);

      // A SIGKILLed owner leaves its lock behind; its pid no longer exists.
      const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
      writeFileSync(`${dataDir}.lock`, `${gone}\n`);
      const second = await createPGliteStore({ dataDir });
      try {
        const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM ledgerflow.schema_migration`.execute(
          second.db,
        );
        expect(rows[0]!.n).toBeGreaterThan(0);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
