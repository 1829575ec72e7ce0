import { compensationsOf, shapeHash, type WorkflowShape } from '../../dsl/workflow-shape.js';

/**
 * One migration per workflow version: registers the version and its step definitions. The core
 * schema's foreign keys then make the database refuse (a) a run of an unregistered version,
 * (b) a step result whose kind differs from the declared one, and (c) a completed
 * `transactional`/`external` step without a recorded ledger row under its key.
 *
 * A draft version's migration (`draftMigration`: the migration's own file name) records that name in
 * `workflow_version.draft_migration`, so that `ledgerflow migrate` can tell a changed draft (which
 * it replaces while the version has no runs) from an edited released migration (which it refuses).
 */
export function workflowVersionSql(shape: WorkflowShape, options: { readonly draftMigration?: string } = {}): string {
  const name = literal(shape.name);
  const draft = options.draftMigration;
  const lines = [
    `-- ${shape.name} v${shape.version}: ${shape.steps.length} step(s)`,
    ...(draft === undefined
      ? [
          `INSERT INTO ledgerflow.workflow_version (workflow_name, version, definition_hash)`,
          `VALUES (${name}, ${shape.version}, ${literal(shapeHash(shape))});`,
        ]
      : [
          // A draft names the migration that registered it: `migrate` may replace it while it has no runs (core 0020).
          `INSERT INTO ledgerflow.workflow_version (workflow_name, version, definition_hash, draft_migration)`,
          `VALUES (${name}, ${shape.version}, ${literal(shapeHash(shape))}, ${literal(draft)});`,
        ]),
  ];
  if (shape.compensateOnCancel === true) {
    lines.push(
      `UPDATE ledgerflow.workflow_version SET compensate_on_cancel = true WHERE workflow_name = ${name} AND version = ${shape.version};`,
    );
  }
  if (shape.steps.length > 0) {
    lines.push(
      '',
      `INSERT INTO ledgerflow.workflow_step_def (workflow_name, version, step_name, position, kind, idempotent_by_key)`,
      'VALUES',
      `${shape.steps
        .map(
          (step, position) =>
            `    (${name}, ${shape.version}, ${literal(step.name)}, ${position}, ${literal(step.kind)}, ${step.idempotentByKey})`,
        )
        .join(',\n')};`,
    );
  }
  const compensations = compensationsOf(shape);
  if (compensations.length > 0) {
    lines.push(
      '',
      '-- compensations, in the order they run (core 0013)',
      `INSERT INTO ledgerflow.workflow_step_def (workflow_name, version, step_name, position, kind, idempotent_by_key, compensates)`,
      'VALUES',
      `${compensations
        .map(
          (c) =>
            `    (${name}, ${shape.version}, ${literal(c.name)}, ${c.position}, ${literal(c.kind)}, ${c.idempotentByKey}, ${literal(c.compensates)})`,
        )
        .join(',\n')};`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * The definition hash a released version's migration registers (the text {@link workflowVersionSql}
 * writes without `draftMigration`); null for a draft's migration or any other text. `migrate` uses
 * it to accept the release of a draft that already ran in a database: same shape, now final.
 */
export function releasedDefinitionHash(text: string): { readonly version: number; readonly hash: string } | null {
  const match =
    /^INSERT INTO ledgerflow\.workflow_version \(workflow_name, version, definition_hash\)\nVALUES \('(?:[^']|'')*', (\d+), '([0-9a-f]+)'\);$/m.exec(
      text.replace(/\r\n/g, '\n'),
    );
  return match === null ? null : { version: Number(match[1]), hash: match[2]! };
}

/** Whether a migration is a draft's (what {@link workflowVersionSql} writes with `draftMigration`): codegen may rewrite it. */
export function isDraftMigration(text: string): boolean {
  return /^INSERT INTO ledgerflow\.workflow_version \(workflow_name, version, definition_hash, draft_migration\)$/m.test(
    text,
  );
}

/** File name of a version's migration, without the numeric prefix the emitter assigns. */
export function workflowVersionMigrationSuffix(shape: Pick<WorkflowShape, 'name' | 'version'>): string {
  return `${shape.name}_v${shape.version}.sql`;
}

function literal(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}
