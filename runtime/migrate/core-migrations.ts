import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MigrationError } from '../errors.js';
import { byNumberThenName, readMigrationDirectory, type Migration } from './migration-source.js';

/**
 * ledgerflow's own schema as a numbered, append-only line of SQL files shipped in the package
 * (`runtime/migrate/core/NNNN_name.sql`). `migrate` applies them before any project migration
 * and records each as `core/NNNN_name.sql`, so they can never collide with a project's file
 * names (those have no slash). To change the core schema, add the next numbered file there;
 * a released file is never edited (its checksum is recorded in every database).
 */
export const CORE_MIGRATIONS_DIR = fileURLToPath(new URL('./core/', import.meta.url));

/** Prefix of the names core migrations are recorded under in `ledgerflow.schema_migration`. */
export const CORE_PREFIX = 'core/';

/**
 * Before core migrations shipped with the package, codegen wrote the core schema into the
 * project's `generated/migrations/0001_core.sql`, and databases recorded it under that name.
 * Its statements are exactly those of `core/0001_core.sql` (only the comments differ), so a
 * database that recorded it with one of these checksums already has that schema.
 */
export const LEGACY_CORE_MIGRATION = {
  name: '0001_core.sql',
  /** sha256 of the bytes codegen wrote (`migrationChecksum`), per release that wrote it. */
  checksums: new Set(['7a1cca169303f6563d4b9ce8523f753560ede5f5c525e7450aaa0dba8fcbc9c6']),
  /** The core migration it is equivalent to. */
  supersededBy: `${CORE_PREFIX}0001_core.sql`,
} as const;

/** Is this (name, checksum) the core schema as an earlier ledgerflow's codegen wrote it? */
export function isLegacyCoreMigration(migration: { readonly name: string; readonly checksum: string }): boolean {
  return migration.name === LEGACY_CORE_MIGRATION.name && LEGACY_CORE_MIGRATION.checksums.has(migration.checksum);
}

/** A core migration: its `name` carries the `core/` prefix; `file` is the name in the package. */
export interface CoreMigration extends Migration {
  readonly file: string;
}

/**
 * The core migrations in the order they apply, read from the package.
 *
 * @example
 * coreMigrations().map((m) => m.name); // ['core/0001_core.sql', …]
 */
export function coreMigrations(): CoreMigration[] {
  if (!existsSync(CORE_MIGRATIONS_DIR)) {
    throw new MigrationError(
      `ledgerflow's core migrations are missing from the package (expected in ${CORE_MIGRATIONS_DIR}); reinstall ledgerflow.`,
    );
  }
  return readMigrationDirectory(CORE_MIGRATIONS_DIR)
    .sort(byNumberThenName)
    .map((m) => ({ ...m, file: m.name, name: `${CORE_PREFIX}${m.name}` }));
}
