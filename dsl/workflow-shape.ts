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
  /** The queue each run holds a slot of, if any. */
  readonly queue?: string;
  /** `cancel(runId)` compensates unless it says otherwise (`compensateOnCancel: true`). */
  readonly compensateOnCancel?: true;
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
  /** The queue each attempt of the step holds a slot of. */
  readonly queue?: string;
  /** `transactional` / `external`: the compensation that undoes the step (pinned: a row of its own in workflow_step_def). */
  readonly compensation?: CompensationShape;
}

/** A step's compensation, as pinned: its name (its handler and ledger rows) and whether its provider dedupes. */
export interface CompensationShape {
  readonly name: string;
  readonly idempotentByKey: boolean;
}

/** What {@link shapeOf} reads from a loaded step (a `StepDefinition` has all of it). */
interface LoadedStep {
  readonly name: string;
  readonly kind: StepKind;
  readonly idempotentByKey: boolean;
  readonly conditional?: boolean;
  readonly event?: string;
  readonly child?: string;
  readonly queue?: string | { readonly queue: { readonly name: string } };
  readonly when?: unknown;
  readonly wait?: { readonly event: { readonly name: string } };
  readonly fanOut?: { readonly workflow: { readonly name: string; readonly version: number } };
  readonly compensation?: CompensationShape;
}

/** What {@link shapeOf} reads from a loaded workflow (a `Workflow` has all of it). */
interface LoadedWorkflow {
  readonly name: string;
  readonly version: number;
  readonly steps: ReadonlyArray<LoadedStep>;
  readonly queue?: string | { readonly queue: { readonly name: string } } | undefined;
  readonly compensateOnCancel?: boolean | undefined;
}

const queueName = (use: string | { readonly queue: { readonly name: string } } | undefined): string | undefined =>
  typeof use === 'string' ? use : use?.queue.name;

export function shapeOf(workflow: LoadedWorkflow): WorkflowShape {
  const queue = queueName(workflow.queue);
  return {
    name: workflow.name,
    version: workflow.version,
    ...(queue !== undefined ? { queue } : {}),
    ...(workflow.compensateOnCancel === true ? { compensateOnCancel: true as const } : {}),
    steps: workflow.steps.map((s) => {
      const event = s.event ?? s.wait?.event.name;
      const child =
        s.child ?? (s.fanOut !== undefined ? `${s.fanOut.workflow.name}@${s.fanOut.workflow.version}` : undefined);
      const stepQueue = queueName(s.queue);
      return {
        name: s.name,
        kind: s.kind,
        idempotentByKey: s.idempotentByKey,
        ...(s.conditional === true || typeof s.when === 'function' ? { conditional: true } : {}),
        ...(event !== undefined ? { event } : {}),
        ...(child !== undefined ? { child } : {}),
        ...(stepQueue !== undefined ? { queue: stepQueue } : {}),
        ...(s.compensation !== undefined
          ? { compensation: { name: s.compensation.name, idempotentByKey: s.compensation.idempotentByKey } }
          : {}),
      };
    }),
  };
}

/**
 * Stable hash of a shape; stored in `workflow_version.definition_hash` and the manifest. A step
 * with none of the optional parts hashes exactly as before they existed, so workflow versions
 * migrated by an earlier release keep their hash.
 */
export function shapeHash(workflow: LoadedWorkflow): string {
  const shape = shapeOf(workflow);
  const canonical = shape.steps.map(
    (s, i) =>
      `${i}:${s.name}:${s.kind}:${s.idempotentByKey ? 1 : 0}` +
      (s.conditional === true ? ':when' : '') +
      (s.event !== undefined ? `:event=${s.event}` : '') +
      (s.child !== undefined ? `:child=${s.child}` : '') +
      (s.queue !== undefined ? `:queue=${s.queue}` : '') +
      (s.compensation !== undefined
        ? `:compensate=${s.compensation.name}${s.compensation.idempotentByKey ? ':1' : ':0'}`
        : ''),
  );
  const header =
    `${workflow.name}@${workflow.version}${shape.queue !== undefined ? ` queue=${shape.queue}` : ''}` +
    (shape.compensateOnCancel === true ? ' compensateOnCancel' : '');
  return createHash('sha256')
    .update(`${header}\n${canonical.join('\n')}`)
    .digest('hex')
    .slice(0, 16);
}

/**
 * The compensations of a shape in the order they run (the last declared step's first), each with
 * the position its `workflow_step_def` row takes after the steps and the step it undoes.
 */
export function compensationsOf(shape: Pick<WorkflowShape, 'steps'>): Array<{
  readonly name: string;
  readonly kind: StepKind;
  readonly idempotentByKey: boolean;
  readonly position: number;
  readonly compensates: string;
}> {
  return shape.steps
    .filter((s) => s.compensation !== undefined)
    .reverse()
    .map((s, i) => ({
      name: s.compensation!.name,
      kind: s.kind,
      idempotentByKey: s.compensation!.idempotentByKey,
      position: shape.steps.length + i,
      compensates: s.name,
    }));
}
