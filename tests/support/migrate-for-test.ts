import { basename } from 'node:path';
import { CORE_MIGRATION as CORE_MIGRATION_NAME, planMigrations } from '../../codegen/emit/migrations.js';
import { workflowVersionMigrationSuffix, workflowVersionSql } from '../../codegen/emit/workflow-version-sql.js';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { shapeOf } from '../../dsl/workflow-shape.js';
import { migrate, type MigrateResult } from '../../runtime/migrate/migrate.js';
import type { MigrationFile } from '../../runtime/migrate/migration-source.js';
import type { Store } from '../../runtime/store/store.js';

/**
 * The core schema migration exactly as codegen writes it to `generated/migrations` (same name,
 * same bytes, so the same checksum): a test database can later be migrated by the CLI too.
 */
export const CORE_MIGRATION: MigrationFile = coreMigration();

function coreMigration(): MigrationFile {
  const core = planMigrations([], []).files.find((f) => basename(f.path) === CORE_MIGRATION_NAME);
  if (core === undefined) throw new Error(`codegen did not plan ${CORE_MIGRATION_NAME} for an empty directory`);
  return { name: CORE_MIGRATION_NAME, sql: core.content };
}

/** One in-memory migration per workflow version, as codegen would emit it. */
export function workflowMigrations(workflows: readonly AnyWorkflow[]): MigrationFile[] {
  return workflows.map((w) => {
    const shape = shapeOf(w);
    return { name: `1000_${workflowVersionMigrationSuffix(shape)}`, sql: workflowVersionSql(shape) };
  });
}

/**
 * Brings a test database to the state `ledgerflow migrate` would after codegen for `workflows`:
 * the core schema plus one migration per workflow version, applied through the real migrator.
 *
 * @example
 * const store = await createPgTestStore();
 * await migrateForTest(store, [orderWorkflow]);
 */
export function migrateForTest(store: Store, workflows: readonly AnyWorkflow[] = []): Promise<MigrateResult> {
  return migrate(store, { sources: [[CORE_MIGRATION, ...workflowMigrations(workflows)]] });
}
