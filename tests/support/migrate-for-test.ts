import { workflowVersionMigrationSuffix, workflowVersionSql } from '../../codegen/emit/workflow-version-sql.js';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { shapeOf } from '../../dsl/workflow-shape.js';
import { migrate, type MigrateResult } from '../../runtime/migrate/migrate.js';
import type { MigrationFile } from '../../runtime/migrate/migration-source.js';
import type { Store } from '../../runtime/store/store.js';

/** One in-memory migration per workflow version, as codegen would emit it. */
export function workflowMigrations(workflows: readonly AnyWorkflow[]): MigrationFile[] {
  return workflows.map((w) => {
    const shape = shapeOf(w);
    return { name: `1000_${workflowVersionMigrationSuffix(shape)}`, sql: workflowVersionSql(shape) };
  });
}

/**
 * Brings a test database to the state `ledgerflow migrate` would after codegen for `workflows`:
 * ledgerflow's core migrations (which `migrate` always applies first) plus one migration per
 * workflow version, applied through the real migrator.
 *
 * @example
 * const store = await createPgTestStore();
 * await migrateForTest(store, [orderWorkflow]);
 */
export function migrateForTest(store: Store, workflows: readonly AnyWorkflow[] = []): Promise<MigrateResult> {
  return migrate(store, { sources: [workflowMigrations(workflows)] });
}
