import { shapeHash } from '../../dsl/workflow-shape.js';
import type { ManifestFile } from '../model/manifest.js';
import { partId, pinnedPartKinds } from '../model/pinned-parts.js';
import type { WorkflowModel } from '../model/workflow-model.js';
import { DO_NOT_EDIT } from './generated-file.js';
import { workflowId } from './migrations.js';
import { compareWorkflows } from './naming.js';
import { stableJson } from './stable-json.js';

/**
 * `ledgerflow.manifest.json`: per workflow version its definition hash (the shape: step names,
 * kinds, order, `idempotentByKey`, conditions, events, child versions, queues, compensations), the part kinds it
 * pins and a hash per part (codegen/model/pinned-parts.ts), its source, migration, queue, and
 * steps with their keys (and, where they have them, their condition, event, child workflow and
 * queue), and `draft: true` for a version not yet released. Committed; LF007 and LF009 compare the next run against it. Stable JSON: equal models,
 * equal bytes.
 */
export function emitManifest(
  workflows: readonly WorkflowModel[],
  migrations: ReadonlyMap<string, string>,
  drafts: ReadonlySet<string> = new Set(),
): string {
  const manifest: ManifestFile = {
    '//': `${DO_NOT_EDIT} Regenerate with \`npx ledgerflow codegen\`.`,
    workflows: [...workflows].sort(compareWorkflows).map((workflow) => ({
      name: workflow.name,
      version: workflow.version,
      definitionHash: shapeHash(workflow),
      partKinds: pinnedPartKinds(usesQueue(workflow)),
      parts: Object.fromEntries(workflow.parts.map((part) => [partId(part), part.hash])),
      exportName: workflow.exportName,
      source: workflow.file,
      migration: migrations.get(workflowId(workflow)) ?? '',
      ...(drafts.has(workflowId(workflow)) ? { draft: true as const } : {}),
      ...(workflow.queue === undefined ? {} : { queue: workflow.queue.queue.name }),
      ...(workflow.compensateOnCancel === true ? { compensateOnCancel: true as const } : {}),
      steps: workflow.steps.map((step) => ({
        name: step.name,
        kind: step.kind,
        position: step.position,
        idempotentByKey: step.idempotentByKey,
        key: step.key?.text ?? null,
        ...(step.conditional ? { conditional: true as const } : {}),
        ...(step.wait === undefined ? {} : { event: step.wait.event.name }),
        ...(step.fanOut === undefined ? {} : { child: `${step.fanOut.workflow.name}@${step.fanOut.workflow.version}` }),
        ...(step.queue === undefined ? {} : { queue: step.queue.queue.name }),
        ...(step.compensation === undefined
          ? {}
          : {
              compensation: {
                name: step.compensation.name,
                idempotentByKey: step.compensation.idempotentByKey,
                key: step.compensation.key?.text ?? null,
              },
            }),
      })),
    })),
  };
  return stableJson(manifest);
}

function usesQueue(workflow: WorkflowModel): boolean {
  return workflow.queue !== undefined || workflow.steps.some((step) => step.queue !== undefined);
}
