import pg from 'pg';
import { CORE_SCHEMA_SQL } from '../codegen/emit/core-schema-sql.js';
import { workflowVersionSql } from '../codegen/emit/workflow-version-sql.js';
import type { WorkflowShape } from '../dsl/workflow-shape.js';

/** Installs the core schema and the bench workflows' versions, from the same emitters codegen uses. */
export async function installSchema(url: string, shapes: readonly WorkflowShape[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(CORE_SCHEMA_SQL);
    for (const shape of shapes) await client.query(workflowVersionSql(shape));
  } finally {
    await client.end();
  }
}
