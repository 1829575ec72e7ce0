import { sql, type Kysely, type Transaction } from 'kysely';
import { MigrationError } from '../errors.js';
import type { Store } from '../store/store.js';
import { sqlStateOf } from '../store/sqlstate.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { DEFAULT_MIGRATIONS_DIR, loadMigrations, type Migration, type MigrationSource } from './migration-source.js';

export interface MigrateOptions {
  /** Directories of `NNNN_name.sql` files and/or in-memory migrations. Default: `generated/migrations`. */
  readonly sources?: readonly MigrationSource[];
  /** Called after each migration commits (progress output). */
  readonly onApplied?: (migration: Migration) => void;
}

export interface MigrateResult {
  /** Applied by this call, in order. */
  readonly applied: readonly string[];
  /** Already recorded with the same checksum (by an earlier run or a concurrent process). */
  readonly skipped: readonly string[];
  /** Recorded in the database but in none of the sources, e.g. applied from a newer checkout. */
  readonly unknown: readonly string[];
}

/**
 * Every migration run takes this transaction-scoped advisory lock first, so concurrent
 * `migrate` calls (several workers starting at once) apply each file exactly once, in order.
 * A transaction lock rather than a session lock: it works on one pooled connection per
 * transaction and on PGlite alike, and cannot leak if a process dies.
 */
const MIGRATION_LOCK_KEY = 0x4c46_4d49; // "LFMI"

const LEDGER_DDL = `CREATE SCHEMA IF NOT EXISTS ledgerflow;
CREATE TABLE IF NOT EXISTS ledgerflow.schema_migration (
    name       text        PRIMARY KEY,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);`;

/**
 * Applies the migrations that are not yet recorded in `ledgerflow.schema_migration`, each in
 * its own transaction together with its ledger row, so a failing file leaves nothing behind.
 * Refuses to run at all when a file that was already applied has changed since (its checksum
 * differs): migrations are append-only. Safe to run twice and from several processes at once.
 *
 * A migration must not manage transactions itself (no BEGIN/COMMIT, no `CREATE INDEX CONCURRENTLY`).
 *
 * @example
 * const { applied } = await migrate(store); // generated/migrations/*.sql
 * await migrate(store, { sources: ['generated/migrations', 'db/migrations'] });
 */
export async function migrate(store: Store, options: MigrateOptions = {}): Promise<MigrateResult> {
  const migrations = loadMigrations(options.sources ?? [DEFAULT_MIGRATIONS_DIR]);
  const db = store.db;

  const recorded = await db.transaction().execute(async (trx) => {
    await lock(trx);
    await sql.raw(LEDGER_DDL).execute(trx);
    return trx.selectFrom('ledgerflow.schema_migration').select(['name', 'checksum']).orderBy('name').execute();
  });

  const known = new Map(migrations.map((m) => [m.name, m]));
  const changed = recorded.flatMap((row) => {
    const migration = known.get(row.name);
    return migration !== undefined && migration.checksum !== row.checksum ? [{ migration, applied: row.checksum }] : [];
  });
  if (changed.length > 0) throw changedError(changed);

  const recordedNames = new Set(recorded.map((r) => r.name));
  const applied: string[] = [];
  const skipped: string[] = [];
  for (const migration of migrations) {
    if (!recordedNames.has(migration.name) && (await applyOne(db, migration))) {
      applied.push(migration.name);
      options.onApplied?.(migration);
    } else {
      skipped.push(migration.name);
    }
  }
  return { applied, skipped, unknown: recorded.map((r) => r.name).filter((name) => !known.has(name)) };
}

/** Applies one migration under the lock; `false` when another process applied it meanwhile. */
async function applyOne(db: Kysely<LedgerflowDatabase>, migration: Migration): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    await lock(trx);
    const row = await trx
      .selectFrom('ledgerflow.schema_migration')
      .select('checksum')
      .where('name', '=', migration.name)
      .executeTakeFirst();
    if (row !== undefined) {
      if (row.checksum !== migration.checksum) throw changedError([{ migration, applied: row.checksum }]);
      return false;
    }
    try {
      await sql.raw(migration.sql).execute(trx);
    } catch (error) {
      throw new MigrationError(
        `Migration ${migration.origin} failed${lineOf(error, migration.sql)}: ${messageOf(error)}` +
          `${sqlStateOf(error) ? ` (SQLSTATE ${sqlStateOf(error)})` : ''}. ` +
          'It was rolled back and not recorded; fix the file and run `ledgerflow migrate` again.',
        { cause: error },
      );
    }
    await trx.insertInto('ledgerflow.schema_migration').values({ name: migration.name, checksum: migration.checksum }).execute();
    return true;
  });
}

async function lock(trx: Transaction<LedgerflowDatabase>): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_KEY)})`.execute(trx);
}

function changedError(changed: ReadonlyArray<{ migration: Migration; applied: string }>): MigrationError {
  const lines = changed.map(
    ({ migration, applied }) =>
      `  ${migration.origin}: applied with checksum ${applied}, the file now has ${migration.checksum}`,
  );
  return new MigrationError(
    `${changed.length === 1 ? 'A migration was' : 'Migrations were'} changed after being applied:\n${lines.join('\n')}\n` +
      'Applied migrations are append-only. Restore the original file (e.g. `git checkout` it) and put the change ' +
      'in a new migration with a higher number; nothing was applied.',
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** PostgreSQL reports a 1-based character offset into the statement; turn it into a line. */
function lineOf(error: unknown, text: string): string {
  const position = typeof error === 'object' && error !== null && 'position' in error ? Number(error.position) : NaN;
  if (!Number.isInteger(position) || position < 1) return '';
  return ` at line ${text.slice(0, position - 1).split('\n').length}`;
}
