import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { MigrationError } from '../errors.js';

/** Where codegen writes the migrations for the project's workflows. */
export const DEFAULT_MIGRATIONS_DIR = 'generated/migrations';

/** A migration given in memory rather than as a file (tests, embedding applications). */
export interface MigrationFile {
  /** Numbered file name, e.g. `0002_orders_v1.sql`; unique across all sources. */
  readonly name: string;
  readonly sql: string;
}

/** A directory of `NNNN_name.sql` files, or migrations given in memory. */
export type MigrationSource = string | readonly MigrationFile[];

/** One migration ready to apply. */
export interface Migration extends MigrationFile {
  /** sha256 (hex) of the SQL with line endings normalised, recorded when applied. */
  readonly checksum: string;
  /** The file it was read from, or `<memory>`; for messages. */
  readonly origin: string;
  /** The leading number of the name; migrations apply in (number, name) order. */
  readonly number: number;
}

const MIGRATION_NAME = /^(\d+)_[A-Za-z0-9][A-Za-z0-9_.-]*\.sql$/;

/** Line endings are normalised so a checkout with CRLF conversion does not look like an edit. */
export function migrationChecksum(sql: string): string {
  return createHash('sha256').update(sql.replace(/\r\n/g, '\n')).digest('hex');
}

/**
 * Reads every source and returns the migrations in the order they apply. Names must be
 * numbered (`0002_orders_v1.sql`) and unique across sources; a directory that does not exist is an
 * error (it usually means `ledgerflow codegen` has not run).
 *
 * @example
 * const migrations = loadMigrations(['generated/migrations', 'db/app-migrations']);
 */
export function loadMigrations(sources: readonly MigrationSource[]): Migration[] {
  const byName = new Map<string, Migration>();
  for (const source of sources) {
    for (const migration of typeof source === 'string' ? readMigrationDirectory(source) : fromMemory(source)) {
      const existing = byName.get(migration.name);
      if (existing !== undefined) {
        throw new MigrationError(
          `Two migrations are named ${migration.name} (${existing.origin} and ${migration.origin}). ` +
            'Migration names are recorded in ledgerflow.schema_migration and must be unique across all directories: rename one.',
        );
      }
      byName.set(migration.name, migration);
    }
  }
  return [...byName.values()].sort(byNumberThenName);
}

/** The order migrations apply in: by number, then by name. */
export function byNumberThenName(a: Migration, b: Migration): number {
  return a.number - b.number || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

/** The numbered `.sql` files of one directory (other files are ignored), unsorted. */
export function readMigrationDirectory(directory: string): Migration[] {
  if (!existsSync(directory) || !statSync(directory).isDirectory()) {
    throw new MigrationError(
      `Migrations directory ${directory} does not exist. Run \`ledgerflow codegen\` to generate it, or pass --dir <directory>.`,
    );
  }
  return readdirSync(directory)
    .filter((file) => file.endsWith('.sql'))
    .map((file) => toMigration(file, readFileSync(join(directory, file), 'utf8'), join(directory, file)));
}

function fromMemory(files: readonly MigrationFile[]): Migration[] {
  return files.map((file) => toMigration(file.name, file.sql, `<memory>/${file.name}`));
}

function toMigration(name: string, sql: string, origin: string): Migration {
  const match = MIGRATION_NAME.exec(name);
  if (match === null) {
    throw new MigrationError(
      `Migration file name ${origin} is not of the form NNNN_name.sql (digits, an underscore, then letters, digits, _ . -). ` +
        'Rename it so the number orders it after the migrations it depends on.',
    );
  }
  return { name, sql, checksum: migrationChecksum(sql), origin, number: Number(match[1]) };
}
