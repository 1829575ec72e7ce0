import { isBuiltInKind, type BuiltInStepKind } from '../../dsl/step-kind.js';
import type { AnyWorkflow, WorkflowInput, WorkflowStepName, WorkflowStepSpec } from '../../dsl/workflow.js';
import { shapeHash } from '../../dsl/workflow-shape.js';
import type { HandlerFor } from './handler-types.js';

/**
 * Handlers for every step of `W` that takes one, each of the shape its kind demands. Built-in
 * kinds (`sleep`, `waitFor`, `child`, `forEach`) take none: the runtime carries them out.
 */
export type WorkflowHandlers<W extends AnyWorkflow, TDatabase = {}> = {
  readonly [N in WorkflowStepName<W> as WorkflowStepSpec<W, N> extends { readonly kind: BuiltInStepKind }
    ? never
    : N]: HandlerFor<WorkflowStepSpec<W, N>, WorkflowInput<W>, TDatabase>;
};

/** A workflow bound to its handlers, as produced by the generated `<name>Handlers(...)` functions. */
export interface WorkflowRegistration<W extends AnyWorkflow = AnyWorkflow> {
  readonly workflow: W;
  readonly handlers: Readonly<Record<string, unknown>>;
  /** The definition hash codegen saw; must equal the workflow's own and the migrated one. */
  readonly definitionHash: string;
}

export class StaleContractError extends Error {
  override readonly name = 'StaleContractError';
}

/**
 * Binds handlers to a workflow. Called by generated code with the hash codegen computed; a
 * mismatch means the workflow changed after the last `ledgerflow codegen`.
 */
export function bindHandlers<W extends AnyWorkflow, TDatabase>(
  workflow: W,
  handlers: WorkflowHandlers<W, TDatabase>,
  definitionHash: string,
): WorkflowRegistration<W> {
  const actual = shapeHash(workflow);
  if (actual !== definitionHash) {
    throw new StaleContractError(
      `The generated contract for workflow "${workflow.name}" v${workflow.version} is stale ` +
        `(generated for ${definitionHash}, definition is ${actual}). Run \`npx ledgerflow codegen\`.`,
    );
  }
  const missing = [...workflow.steps, ...workflow.compensations]
    .filter((s) => !isBuiltInKind(s.kind) && !(s.name in handlers))
    .map((s) => s.name);
  if (missing.length > 0) {
    throw new TypeError(`Workflow "${workflow.name}" has no handler for step(s): ${missing.join(', ')}.`);
  }
  return { workflow, handlers: handlers as Readonly<Record<string, unknown>>, definitionHash };
}
