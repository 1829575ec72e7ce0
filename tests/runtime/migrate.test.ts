import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MigrationError } from '../../runtime/errors.js';
import { migrate } from '../../runtime/migrate/migrate.js';
import {
  CORE_MIGRATIONS_DIR,
  coreMigrations,
  isLegacyCoreMigration,
  LEGACY_CORE_MIGRATION,
} from '../../runtime/migrate/core-migrations.js';
import { migrationChecksum, type MigrationFile } from '../../runtime/migrate/migration-source.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import type { Store } from '../../runtime/store/store.js';
import { describeStores } from '../support/describe-stores.js';
import { workflowMigrations } from '../support/migrate-for-test.js';
import { schemaDrift } from '../support/schema-drift.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { twoSteps } from './fixtures/test-workflows.js';

const CORE_NAMES = coreMigrations().map((m) => m.name);

async function recorded(store: Store): Promise<Array<{ name: string; checksum: string }>> {
  return store.db.selectFrom('ledgerflow.schema_migration').select(['name', 'checksum']).orderBy('name').execute();
}

async function tableExists(store: Store, table: string): Promise<boolean> {
  const { rows } = await sql<{ found: string | null }>`SELECT to_regclass(${table})::text AS found`.execute(store.db);
  return rows[0]?.found != null;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

describeStores('migrate', (getStore) => {
  it('applies in-memory migrations in number order, records name and checksum, and skips them the second time', async () => {
    const store = getStore();
    const files: MigrationFile[] = [
      // Given out of order on purpose: 10 sorts after 9 numerically, not by string.
      { name: '0010_order_b.sql', sql: 'INSERT INTO public.order_log VALUES (2);' },
      {
        name: '0009_order_a.sql',
        sql: 'CREATE TABLE public.order_log (n int);\nINSERT INTO public.order_log VALUES (1);',
      },
    ];
    const first = await migrate(store, { sources: [files] });
    expect(first).toEqual({
      applied: ['0009_order_a.sql', '0010_order_b.sql'],
      // The test database was migrated from the same template: its core is in place.
      skipped: CORE_NAMES,
      adopted: [],
      superseded: [],
      unknown: [],
      replaced: [],
    });
    const { rows } = await sql<{ n: number }>`SELECT n FROM public.order_log ORDER BY n`.execute(store.db);
    expect(rows.map((r) => r.n)).toEqual([1, 2]);
    expect(await recorded(store)).toEqual(
      expect.arrayContaining([
        ...coreMigrations().map((m) => ({ name: m.name, checksum: m.checksum })),
        { name: '0009_order_a.sql', checksum: migrationChecksum(files[1]!.sql) },
        { name: '0010_order_b.sql', checksum: migrationChecksum(files[0]!.sql) },
      ]),
    );

    const second = await migrate(store, { sources: [files] });
    expect(second.applied).toEqual([]);
    expect(second.skipped).toEqual([...CORE_NAMES, '0009_order_a.sql', '0010_order_b.sql']);
  });

  it('refuses to run when an applied migration changed, naming the file and both checksums, and applies nothing', async () => {
    const store = getStore();
    const original = { name: '0020_checksum.sql', sql: 'CREATE TABLE public.checksum_t (a int);' };
    await migrate(store, { sources: [[original]] });
    const edited = { name: original.name, sql: 'CREATE TABLE public.checksum_t (a int, b int);' };
    const next = { name: '0021_after.sql', sql: 'CREATE TABLE public.after_checksum (a int);' };

    const error = await rejection(migrate(store, { sources: [[edited, next]] }));
    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toContain('<memory>/0020_checksum.sql');
    expect(error.message).toContain(`applied with checksum ${migrationChecksum(original.sql)}`);
    expect(error.message).toContain(`the file now has ${migrationChecksum(edited.sql)}`);
    expect(error.message).toContain('new migration with a higher number');
    expect(await tableExists(store, 'public.after_checksum')).toBe(false);
    expect((await recorded(store)).map((r) => r.name)).not.toContain('0021_after.sql');
  });

  it('treats CRLF line endings as the same file', async () => {
    const store = getStore();
    await migrate(store, {
      sources: [[{ name: '0030_crlf.sql', sql: 'CREATE TABLE public.crlf_t (a int);\nSELECT 1;' }]],
    });
    const again = await migrate(store, {
      sources: [[{ name: '0030_crlf.sql', sql: 'CREATE TABLE public.crlf_t (a int);\r\nSELECT 1;' }]],
    });
    expect(again.skipped).toEqual([...CORE_NAMES, '0030_crlf.sql']);
  });

  it('rolls a failing migration back entirely and does not record it; earlier ones in the run stay applied', async () => {
    const store = getStore();
    const good = { name: '0040_good.sql', sql: 'CREATE TABLE public.good_t (a int);' };
    const bad = {
      name: '0041_bad.sql',
      sql: "CREATE TABLE public.bad_t (a int);\nINSERT INTO public.bad_t VALUES (1);\nINSERT INTO public.bad_t VALUES ('not a number');",
    };
    const later = { name: '0042_later.sql', sql: 'CREATE TABLE public.later_t (a int);' };

    const error = await rejection(migrate(store, { sources: [[good, bad, later]] }));
    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toMatch(
      /^Migration <memory>\/0041_bad\.sql failed at line 3: invalid input syntax for type integer: "not a number" \(SQLSTATE 22P02\)\. It was rolled back and not recorded/,
    );
    expect(await tableExists(store, 'public.good_t')).toBe(true);
    expect(await tableExists(store, 'public.bad_t')).toBe(false);
    expect(await tableExists(store, 'public.later_t')).toBe(false);
    const names = (await recorded(store)).map((r) => r.name);
    expect(names).toContain('0040_good.sql');
    expect(names).not.toContain('0041_bad.sql');
    expect(names).not.toContain('0042_later.sql');

    const fixed = { name: bad.name, sql: 'CREATE TABLE public.bad_t (a int);' };
    const retry = await migrate(store, { sources: [[good, fixed, later]] });
    expect(retry.applied).toEqual(['0041_bad.sql', '0042_later.sql']);
  });

  it('reads numbered .sql files from several directories and reports recorded migrations it does not know', async () => {
    const store = getStore();
    const a = mkdtempSync(join(tmpdir(), 'lf-mig-a-'));
    const b = mkdtempSync(join(tmpdir(), 'lf-mig-b-'));
    try {
      writeFileSync(join(a, '0051_dir_a.sql'), 'CREATE TABLE public.dir_a (a int);');
      writeFileSync(join(a, 'README.md'), 'not a migration');
      writeFileSync(join(b, '0050_dir_b.sql'), 'CREATE TABLE public.dir_b (a int);');
      const result = await migrate(store, { sources: [a, b] });
      expect(result.applied).toEqual(['0050_dir_b.sql', '0051_dir_a.sql']);
      // Everything the earlier tests applied from memory is recorded but not in these directories;
      // the core migrations are never unknown.
      expect(result.unknown).toEqual(expect.arrayContaining(['0009_order_a.sql', '0040_good.sql']));
      expect(result.unknown.filter((name) => name.startsWith('core/'))).toEqual([]);
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });

  it('runs safely when called concurrently on one store', async () => {
    const store = getStore();
    const files = [
      { name: '0060_conc.sql', sql: 'CREATE TABLE public.conc_log (n int);' },
      { name: '0061_conc.sql', sql: 'INSERT INTO public.conc_log VALUES (1);' },
    ];
    const results = await Promise.all([1, 2, 3].map(() => migrate(store, { sources: [[...files]] })));
    expect(results.flatMap((r) => r.applied).sort()).toEqual(['0060_conc.sql', '0061_conc.sql']);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM public.conc_log`.execute(store.db);
    expect(rows[0]?.n).toBe(1);
  });

  it('accepts the committed generated/migrations as the default source (core schema identical to the template)', async () => {
    const store = getStore();
    const result = await migrate(store);
    expect(result.skipped).toEqual(expect.arrayContaining(CORE_NAMES));
    expect(result.superseded).toEqual([]);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM ledgerflow.workflow_version`.execute(
      store.db,
    );
    expect(rows[0]?.n).toBeGreaterThan(0);
  });
});

const LEGACY_FIXTURE = fileURLToPath(new URL('./fixtures/legacy-0001_core.sql', import.meta.url));
const legacyCore = (): MigrationFile => ({ name: '0001_core.sql', sql: readFileSync(LEGACY_FIXTURE, 'utf8') });

/** The SQL without its leading comment block: what the database actually runs. */
const statements = (text: string): string => text.replace(/^(?:--[^\n]*\n|\n)*/, '');

describe('core migrations in the package', () => {
  it('are numbered files under runtime/migrate/core, named core/NNNN_name.sql, 0001 first', () => {
    const core = coreMigrations();
    expect(core[0]).toMatchObject({ name: 'core/0001_core.sql', file: '0001_core.sql', number: 1 });
    expect(core.every((m) => m.origin === join(CORE_MIGRATIONS_DIR, m.file) && /^core\/\d{4}_/.test(m.name))).toBe(
      true,
    );
    expect(core.map((m) => m.number)).toEqual([...core.map((m) => m.number)].sort((a, b) => a - b));
    expect(new Set(core.map((m) => m.number)).size, 'two core migrations share a number').toBe(core.length);
  });

  it("know the previous release's generated 0001_core.sql by its checksum, and run exactly its statements as core/0001", () => {
    const legacy = legacyCore();
    expect(LEGACY_CORE_MIGRATION.checksums.has(migrationChecksum(legacy.sql))).toBe(true);
    expect(isLegacyCoreMigration({ name: legacy.name, checksum: migrationChecksum(legacy.sql) })).toBe(true);
    expect(isLegacyCoreMigration({ name: '0002_core.sql', checksum: migrationChecksum(legacy.sql) })).toBe(false);
    // Recording core/0001 without running it is only sound while both create the same schema.
    const core0001 = coreMigrations().find((m) => m.name === LEGACY_CORE_MIGRATION.supersededBy)!;
    expect(statements(core0001.sql)).toBe(statements(legacy.sql));
    expect(statements(core0001.sql).startsWith('CREATE SCHEMA IF NOT EXISTS ledgerflow;')).toBe(true);
  });
});

describeStores('migrate: ledgerflow core migrations', (getStore) => {
  const workflow = workflowMigrations([twoSteps]);

  it('applies the core first on an empty database, once even when called concurrently, and nothing the second time', async () => {
    const store = getStore();
    await sql`DROP SCHEMA ledgerflow CASCADE`.execute(store.db);
    const progress: string[] = [];
    // The workflow migration inserts into ledgerflow.workflow_version: it only works after the core.
    const results = await Promise.all(
      [1, 2, 3].map(() => migrate(store, { sources: [workflow], onApplied: (m) => progress.push(m.name) })),
    );
    expect(results.flatMap((r) => r.applied).sort()).toEqual([...CORE_NAMES, workflow[0]!.name].sort());
    // In commit order (each file commits on its own, so its applied_at is its transaction's start):
    // all of the core before the first of the sources. (The three calls' onApplied callbacks may
    // interleave: a call hears of its commit after another call has taken the lock for the next file.)
    const { rows: committed } = await sql<{
      name: string;
    }>`SELECT name FROM ledgerflow.schema_migration ORDER BY applied_at, name`.execute(store.db);
    expect(committed.map((r) => r.name)).toEqual([...CORE_NAMES, workflow[0]!.name]);
    expect([...progress].sort()).toEqual([...CORE_NAMES, workflow[0]!.name].sort());
    expect(await recorded(store)).toEqual([
      { name: workflow[0]!.name, checksum: migrationChecksum(workflow[0]!.sql) },
      ...coreMigrations().map((m) => ({ name: m.name, checksum: migrationChecksum(readFileSync(m.origin, 'utf8')) })),
    ]);
    expect(await schemaDrift(store)).toEqual([]);

    const again = await migrate(store, { sources: [workflow] });
    expect(again).toEqual({
      applied: [],
      skipped: [...CORE_NAMES, workflow[0]!.name],
      adopted: [],
      superseded: [],
      unknown: [],
      replaced: [],
    });
  });

  it("recognises the previous release's 0001_core.sql in a source: recorded, never run, never unknown", async () => {
    const store = getStore();
    await sql`DROP SCHEMA ledgerflow CASCADE`.execute(store.db);
    const dir = mkdtempSync(join(tmpdir(), 'lf-mig-legacy-'));
    try {
      copyFileSync(LEGACY_FIXTURE, join(dir, '0001_core.sql'));
      for (const m of workflow) writeFileSync(join(dir, m.name), m.sql);
      // Run on top of the core it would fail (its CREATE TABLEs exist): success shows it was not run.
      const first = await migrate(store, { sources: [dir] });
      expect(first).toEqual({
        applied: [...CORE_NAMES, workflow[0]!.name],
        skipped: [],
        adopted: [],
        superseded: ['0001_core.sql'],
        unknown: [],
        replaced: [],
      });
      expect((await recorded(store)).find((r) => r.name === '0001_core.sql')).toEqual({
        name: '0001_core.sql',
        checksum: migrationChecksum(legacyCore().sql),
      });
      const second = await migrate(store, { sources: [dir] });
      expect(second).toEqual({
        applied: [],
        skipped: [...CORE_NAMES, workflow[0]!.name],
        adopted: [],
        superseded: ['0001_core.sql'],
        unknown: [],
        replaced: [],
      });
      // Deleting the old file is fine too: its row is known, not reported as unknown.
      rmSync(join(dir, '0001_core.sql'));
      expect((await migrate(store, { sources: [dir] })).unknown).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('treats a 0001_core.sql with other content as an ordinary migration of the project', async () => {
    const store = getStore();
    const own = { name: '0001_core.sql', sql: 'CREATE TABLE public.own_core (a int);' };
    await sql`DELETE FROM ledgerflow.schema_migration WHERE name = '0001_core.sql'`.execute(store.db);
    const result = await migrate(store, { sources: [[own]] });
    expect(result.applied).toEqual(['0001_core.sql']);
    expect(result.superseded).toEqual([]);
    expect(await tableExists(store, 'public.own_core')).toBe(true);
  });

  it('refuses a core migration whose checksum differs from the recorded one, as a bug in ledgerflow, and applies nothing', async () => {
    const store = getStore();
    const name = CORE_NAMES[0]!;
    const { checksum } = (await recorded(store)).find((r) => r.name === name)!;
    await sql`UPDATE ledgerflow.schema_migration SET checksum = '0ld' WHERE name = ${name}`.execute(store.db);
    try {
      const later = { name: '0070_after_core_change.sql', sql: 'CREATE TABLE public.after_core_change (a int);' };
      const error = await rejection(migrate(store, { sources: [[later]] }));
      expect(error).toBeInstanceOf(MigrationError);
      expect(error.message).toContain(
        `${name} (ledgerflow's core migration ${join(CORE_MIGRATIONS_DIR, '0001_core.sql')}): applied with checksum 0ld, the file now has ${checksum}`,
      );
      expect(error.message).toContain('a bug in ledgerflow');
      expect(error.message).not.toContain('git checkout');
      expect(error.message).toMatch(/Nothing was applied\.$/);
      expect(await tableExists(store, 'public.after_core_change')).toBe(false);
    } finally {
      await sql`UPDATE ledgerflow.schema_migration SET checksum = ${checksum} WHERE name = ${name}`.execute(store.db);
    }
  });
});

describe('migration sources', () => {
  it('rejects badly named files and duplicate names before touching the database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lf-mig-bad-'));
    const unreachable = createPgStore({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
    try {
      writeFileSync(join(dir, 'core.sql'), 'SELECT 1;');
      const badName = await rejection(migrate(unreachable, { sources: [dir] }));
      expect(badName).toBeInstanceOf(MigrationError);
      expect(badName.message).toContain(`${join(dir, 'core.sql')} is not of the form NNNN_name.sql`);

      const duplicate = await rejection(
        migrate(unreachable, {
          sources: [[{ name: '0001_x.sql', sql: 'SELECT 1;' }], [{ name: '0001_x.sql', sql: 'SELECT 2;' }]],
        }),
      );
      expect(duplicate.message).toContain('Two migrations are named 0001_x.sql');

      const missing = await rejection(migrate(unreachable, { sources: [join(dir, 'nope')] }));
      expect(missing.message).toContain('does not exist. Run `ledgerflow codegen`');
    } finally {
      await unreachable.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('migrate from several processes at once [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('applies each migration exactly once, even onto an empty database', async () => {
    // Start from nothing, so the bootstrap of the ledger table itself races too.
    await sql`DROP SCHEMA ledgerflow CASCADE`.execute(store.db);
    const files: MigrationFile[] = [
      { name: '0002_log.sql', sql: 'CREATE TABLE public.apply_log (name text);' },
      ...[3, 4, 5, 6].map((n) => ({
        name: `000${n}_step.sql`,
        // The sleep widens the window in which a second process could slip in without the lock.
        sql: `SELECT pg_sleep(0.02);\nINSERT INTO public.apply_log VALUES ('000${n}');`,
      })),
    ];
    const pools = Array.from({ length: 6 }, () => createPgStore({ connectionString: store.url!, maxConnections: 2 }));
    try {
      const results = await Promise.all(pools.map((pool) => migrate(pool, { sources: [files] })));
      const all = [...CORE_NAMES, ...files.map((f) => f.name)].sort();
      expect(results.flatMap((r) => r.applied).sort()).toEqual(all);
      for (const result of results) {
        expect([...result.applied, ...result.skipped].sort()).toEqual(all);
        // Whatever a process applied of the core, it applied before any of the sources'.
        const firstOfSources = result.applied.findIndex((name) => !name.startsWith('core/'));
        if (firstOfSources >= 0)
          expect(result.applied.slice(firstOfSources).filter((name) => name.startsWith('core/'))).toEqual([]);
      }
    } finally {
      await Promise.all(pools.map((pool) => pool.close()));
    }
    const { rows } = await sql<{ name: string }>`SELECT name FROM public.apply_log ORDER BY name`.execute(store.db);
    expect(rows.map((r) => r.name)).toEqual(['0003', '0004', '0005', '0006']);
    expect((await recorded(store)).map((r) => r.name)).toEqual([...files.map((f) => f.name), ...CORE_NAMES]);
  });
});
