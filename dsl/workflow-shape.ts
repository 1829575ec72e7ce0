import { createHash } from 'node:crypto';
import type { StepKind } from './step-kind.js';

/**
 * The part of a workflow version that the database and the manifest pin: step names, order,
 * kinds and whether the provider dedupes. Codegen computes it statically from source, the
 * runtime from the loaded definition; both must agree before a worker runs the version.
 */
export interface WorkflowShape {
  readonly name: string;
  readonly version: number;
  readonly steps: ReadonlyArray<{ readonly name: string; readonly kind: StepKind; readonly idempotentByKey: boolean }>;
}

export function shapeOf(workflow: WorkflowShape): WorkflowShape {
  return {
    name: workflow.name,
    version: workflow.version,
    steps: workflow.steps.map((s) => ({ name: s.name, kind: s.kind, idempotentByKey: s.idempotentByKey })),
  };
}

/** Stable hash of a shape; stored in `workflow_version.definition_hash` and the manifest. */
export function shapeHash(workflow: WorkflowShape): string {
  const canonical = shapeOf(workflow).steps.map((s, i) => `${i}:${s.name}:${s.kind}:${s.idempotentByKey ? 1 : 0}`);
  return createHash('sha256')
    .update(`${workflow.name}@${workflow.version}\n${canonical.join('\n')}`)
    .digest('hex')
    .slice(0, 16);
}
