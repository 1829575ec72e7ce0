import { shapeOf } from '../../dsl/workflow-shape.js';
import type { WorkflowModel } from '../model/workflow-model.js';
import { DO_NOT_EDIT, MIGRATIONS_DIR, type GeneratedFile } from './generated-file.js';
import { compareWorkflows } from './naming.js';
import { workflowVersionMigrationSuffix, workflowVersionSql } from './workflow-version-sql.js';

const MIGRATION_FILE = /^(\d{4,})_.+\.sql$/;

export interface MigrationPlan {
  /** Files to create; existing migrations are never among them. */
  readonly files: readonly GeneratedFile[];
  /** Migration file name per workflow version (`name@version`), existing or new. */
  readonly byWorkflow: ReadonlyMap<string, string>;
}

export function workflowId(workflow: Pick<WorkflowModel, 'name' | 'version'>): string {
  return `${workflow.name}@${workflow.version}`;
}

/** Which versions are drafts, and which had a draft migration written by an earlier run. */
export interface DraftVersions {
  /** `name@version` of every draft version (its migration is written in the draft form). */
  readonly drafts: ReadonlySet<string>;
  /**
   * `name@version` of the versions the committed manifest lists as drafts: their existing migration
   * was written as a draft, so it is rewritten — as a draft again, or, once released, for good.
   */
  readonly draftedBefore: ReadonlySet<string>;
}

const NO_DRAFTS: DraftVersions = { drafts: new Set(), draftedBefore: new Set() };

/**
 * Plans the migrations directory append-only: an existing file is never rewritten or renamed —
 * but a draft's, which is rewritten under the same name until the version is released (and once
 * more then, without the draft marker); a workflow version without a migration gets the next number after the highest existing one,
 * new versions in name/version order so that the plan is deterministic. Numbers start at 0002:
 * 0001 was `0001_core.sql`, the core schema that codegen wrote before ledgerflow's core
 * migrations shipped with the package (`runtime/migrate/core`); older projects still have it.
 *
 * @param existing file names already in the migrations directory.
 * @example
 * planMigrations([orderPaymentV2], ['0001_core.sql', '0002_order-payment_v1.sql']).files[0]?.path
 * // 'migrations/0003_order-payment_v2.sql'
 */
export function planMigrations(
  workflows: readonly WorkflowModel[],
  existing: readonly string[],
  versions: DraftVersions = NO_DRAFTS,
): MigrationPlan {
  const files: GeneratedFile[] = [];
  const byWorkflow = new Map<string, string>();
  // Never below 1: an old checkout's 0001_core.sql must not share its number with a new file.
  let highest = Math.max(1, ...existing.map((file) => Number(MIGRATION_FILE.exec(file)?.[1] ?? 0)));
  for (const workflow of [...workflows].sort(compareWorkflows)) {
    const suffix = `_${workflowVersionMigrationSuffix(workflow)}`;
    const present = existing
      .filter(
        (file) => MIGRATION_FILE.test(file) && file.endsWith(suffix) && /^\d+$/.test(file.slice(0, -suffix.length)),
      )
      .sort()[0];
    const id = workflowId(workflow);
    if (present !== undefined && !versions.draftedBefore.has(id)) {
      byWorkflow.set(id, present);
      continue;
    }
    let name = present;
    if (name === undefined) {
      highest += 1;
      name = `${String(highest).padStart(4, '0')}${suffix}`;
    }
    byWorkflow.set(id, name);
    const draft = versions.drafts.has(id);
    const what = `workflow "${workflow.name}" v${workflow.version} (${workflow.file})`;
    files.push({
      path: `${MIGRATIONS_DIR}/${name}`,
      content: draft ? draftSqlFile(what, workflow, name) : sqlFile(what, workflowVersionSql(shapeOf(workflow))),
    });
  }
  return { files, byWorkflow };
}

function sqlFile(what: string, body: string): string {
  return `-- ${DO_NOT_EDIT}\n-- Migration for ${what}. Append-only: never edit an applied migration; add a new one.\n\n${body}`;
}

function draftSqlFile(what: string, workflow: WorkflowModel, name: string): string {
  return (
    `-- ${DO_NOT_EDIT}\n-- Migration for ${what}, a DRAFT: codegen rewrites it while the version changes, and \`ledgerflow migrate\`\n` +
    `-- replaces what an earlier draft registered as long as the version has no runs. Release it before it runs\n` +
    `-- anywhere that matters: \`ledgerflow codegen --release ${workflowId(workflow)}\`.\n\n` +
    workflowVersionSql(shapeOf(workflow), { draftMigration: name })
  );
}
