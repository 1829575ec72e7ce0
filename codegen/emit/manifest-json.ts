import { shapeHash } from '../../dsl/workflow-shape.js';
import type { ManifestFile } from '../model/manifest.js';
import type { WorkflowModel } from '../model/workflow-model.js';
import { DO_NOT_EDIT } from './generated-file.js';
import { workflowId } from './migrations.js';
import { compareWorkflows } from './naming.js';
import { stableJson } from './stable-json.js';

/**
 * `ledgerflow.manifest.json`: per workflow version its definition hash, source, migration and
 * steps with their keys. Committed; LF007 compares the next run against it.
 */
export function emitManifest(workflows: readonly WorkflowModel[], migrations: ReadonlyMap<string, string>): string {
  const manifest: ManifestFile = {
    '//': `${DO_NOT_EDIT} Regenerate with \`npx ledgerflow codegen\`.`,
    workflows: [...workflows].sort(compareWorkflows).map((workflow) => ({
      name: workflow.name,
      version: workflow.version,
      definitionHash: shapeHash(workflow),
      exportName: workflow.exportName,
      source: workflow.file,
      migration: migrations.get(workflowId(workflow)) ?? '',
      steps: workflow.steps.map((step) => ({
        name: step.name,
        kind: step.kind,
        position: step.position,
        idempotentByKey: step.idempotentByKey,
        key: step.key?.text ?? null,
      })),
    })),
  };
  return stableJson(manifest);
}
