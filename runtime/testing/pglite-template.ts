import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installedVersion } from '../../dsl/peer-dependencies.js';
import { coreMigrations } from '../migrate/core-migrations.js';
import { migrate } from '../migrate/migrate.js';
import { createPGliteStore, type PGliteStore } from '../store/pglite/pglite-store.js';

/**
 * A PGlite with ledgerflow's core schema migrated, fast: in memory, or in `dataDir` (which a
 * process can open once this store is closed). Booting PGlite and running the
 * core migrations costs seconds; the migrated data directory is dumped once (under the OS temp
 * directory, keyed by the core migrations and the PGlite version, written then renamed so that a
 * concurrent test process sees all of it or none) and every later store loads a copy of it.
 */
export async function createCoreMigratedPGlite(options: { readonly dataDir?: string } = {}): Promise<PGliteStore> {
  template ??= loadOrBuildTemplate().catch((error: unknown) => {
    template = undefined;
    throw error;
  });
  return createPGliteStore({
    loadDataDir: await template,
    ...(options.dataDir !== undefined ? { dataDir: options.dataDir } : {}),
  });
}

let template: Promise<Blob> | undefined;

async function loadOrBuildTemplate(): Promise<Blob> {
  const key = createHash('sha256')
    // The installed PGlite's version: a dump is only loadable by the PGlite that wrote it.
    .update(
      [installedVersion('@electric-sql/pglite'), ...coreMigrations().flatMap((m) => [m.name, m.checksum])].join('\n'),
    )
    .digest('hex')
    .slice(0, 12);
  const file = join(tmpdir(), `ledgerflow-testing-${key}.tar`);
  if (existsSync(file)) return new Blob([readFileSync(file)]);
  const store = await createPGliteStore();
  try {
    await migrate(store, { sources: [] });
    const bytes = new Uint8Array(await (await store.dumpDataDir()).arrayBuffer());
    const scratch = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    writeFileSync(scratch, bytes);
    renameSync(scratch, file);
    return new Blob([bytes]);
  } finally {
    await store.close();
  }
}
