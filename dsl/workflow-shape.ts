import { createHash } from 'node:crypto';
import type { StepKind } from './step-kind.js';

/**
 * The part of a workflow version that the database and the manifest pin: step names, order,
 * kinds, whether the provider dedupes, and what each step structurally depends on — its
 * condition, the event it waits for, the child workflow version it starts. Codegen computes it
 * statically from source, the runtime from the loaded definition; both must agree before a
 * worker runs the version. (The functions themselves are pinned by source in the manifest: LF007.)
 */
export interface WorkflowShape {
  readonly name: string;
  readonly version: number;
  readonly steps: ReadonlyArray<StepShape>;
}

export interface StepShape {
  readonly name: string;
  readonly kind: StepKind;
  readonly idempotentByKey: boolean;
  /** The step has a `when` condition. */
  readonly conditional?: boolean;
  /** `waitFor`: the event's name. */
  readonly event?: string;
  /** `child` / `forEach`: the child workflow as `name@version`. */
  readonly child?: string;
}

/** What {@link shapeOf} reads from a loaded step (a `StepDefinition` has all of it). */
interface LoadedStep {
  readonly name: string;
  readonly kind: StepKind;
  readonly idempotentByKey: boolean;
  readonly conditional?: boolean;
  readonly event?: string;
  readonly child?: string;
  readonly when?: unknown;
  readonly wait?: { readonly event: { readonly name: string } };
  readonly fanOut?: { readonly workflow: { readonly name: string; readonly version: number } };
}

export function shapeOf(workflow: { readonly name: string; readonly version: number; readonly steps: ReadonlyArray<LoadedStep> }): WorkflowShape {
  return {
    name: workflow.name,
    version: workflow.version,
    steps: workflow.steps.map((s) => {
      const event = s.event ?? s.wait?.event.name;
      const child = s.child ?? (s.fanOut !== undefined ? `${s.fanOut.workflow.name}@${s.fanOut.workflow.version}` : undefined);
      return {
        name: s.name,
        kind: s.kind,
        idempotentByKey: s.idempotentByKey,
        ...(s.conditional === true || typeof s.when === 'function' ? { conditional: true } : {}),
        ...(event !== undefined ? { event } : {}),
        ...(child !== undefined ? { child } : {}),
      };
    }),
  };
}

/**
 * Stable hash of a shape; stored in `workflow_version.definition_hash` and the manifest. A step
 * with none of the optional parts hashes exactly as before they existed, so workflow versions
 * migrated by an earlier release keep their hash.
 */
export function shapeHash(workflow: { readonly name: string; readonly version: number; readonly steps: ReadonlyArray<LoadedStep> }): string {
  const canonical = shapeOf(workflow).steps.map(
    (s, i) =>
      `${i}:${s.name}:${s.kind}:${s.idempotentByKey ? 1 : 0}` +
      (s.conditional === true ? ':when' : '') +
      (s.event !== undefined ? `:event=${s.event}` : '') +
      (s.child !== undefined ? `:child=${s.child}` : ''),
  );
  return createHash('sha256')
    .update(`${workflow.name}@${workflow.version}\n${canonical.join('\n')}`)
    .digest('hex')
    .slice(0, 16);
}
