import { compensationsOf, shapeHash, type WorkflowShape } from '../../dsl/workflow-shape.js';

/**
 * One migration per workflow version: registers the version and its step definitions. The core
 * schema's foreign keys then make the database refuse (a) a run of an unregistered version,
 * (b) a step result whose kind differs from the declared one, and (c) a completed
 * `transactional`/`external` step without a recorded ledger row under its key.
 */
export function workflowVersionSql(shape: WorkflowShape): string {
  const name = literal(shape.name);
  const lines = [
    `-- ${shape.name} v${shape.version}: ${shape.steps.length} step(s)`,
    `INSERT INTO ledgerflow.workflow_version (workflow_name, version, definition_hash)`,
    `VALUES (${name}, ${shape.version}, ${literal(shapeHash(shape))});`,
  ];
  if (shape.compensateOnCancel === true) {
    lines.push(`UPDATE ledgerflow.workflow_version SET compensate_on_cancel = true WHERE workflow_name = ${name} AND version = ${shape.version};`);
  }
  if (shape.steps.length > 0) {
    lines.push(
      '',
      `INSERT INTO ledgerflow.workflow_step_def (workflow_name, version, step_name, position, kind, idempotent_by_key)`,
      'VALUES',
      shape.steps
        .map(
          (step, position) =>
            `    (${name}, ${shape.version}, ${literal(step.name)}, ${position}, ${literal(step.kind)}, ${step.idempotentByKey})`,
        )
        .join(',\n') + ';',
    );
  }
  const compensations = compensationsOf(shape);
  if (compensations.length > 0) {
    lines.push(
      '',
      '-- compensations, in the order they run (core 0013)',
      `INSERT INTO ledgerflow.workflow_step_def (workflow_name, version, step_name, position, kind, idempotent_by_key, compensates)`,
      'VALUES',
      compensations
        .map(
          (c) =>
            `    (${name}, ${shape.version}, ${literal(c.name)}, ${c.position}, ${literal(c.kind)}, ${c.idempotentByKey}, ${literal(c.compensates)})`,
        )
        .join(',\n') + ';',
    );
  }
  return lines.join('\n') + '\n';
}

/** File name of a version's migration, without the numeric prefix the emitter assigns. */
export function workflowVersionMigrationSuffix(shape: Pick<WorkflowShape, 'name' | 'version'>): string {
  return `${shape.name}_v${shape.version}.sql`;
}

function literal(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}
