import type { Diagnostic } from '../model/diagnostic.js';
import type { HandlerBindingModel, HandlerModel } from '../model/handler-model.js';
import type { CommittedManifest } from '../model/manifest.js';
import {
  compensationsOf,
  stepsAndCompensations,
  type AnalysisResult,
  type CompensationModel,
  type KeyModel,
  type StepModel,
  type WorkflowModel,
} from '../model/workflow-model.js';

export interface ValidationInput {
  readonly analysis: AnalysisResult;
  readonly committedManifest: CommittedManifest;
}

/** One rule (an LFnnn code of the table in docs/reference/diagnostics.md): reads the model, returns its diagnostics. */
export type Rule = (input: ValidationInput) => Diagnostic[];

/** Every keyed step and compensation, with its workflow: what the key rules iterate over. */
export function* keyedSteps(
  input: ValidationInput,
): Generator<{ workflow: WorkflowModel; step: StepModel | CompensationModel; key: KeyModel }> {
  for (const workflow of input.analysis.workflows) {
    for (const step of stepsAndCompensations(workflow)) {
      if (step.key !== null) yield { workflow, step, key: step.key };
    }
  }
}

/**
 * How a handler rule names what it found: `transactional step "reserve"`, or for a compensation
 * `transactional compensation "unreserve" (of step "reserve")` — a compensation is declared under
 * its step, so its name alone could send the reader looking for a step of that name.
 */
export function handlerSubject(input: ValidationInput, binding: HandlerBindingModel, handler: HandlerModel): string {
  const workflow = input.analysis.workflows.find((w) => w.name === binding.workflow && w.version === binding.version);
  const compensation =
    workflow === undefined ? undefined : compensationsOf(workflow).find((c) => c.name === handler.step);
  return compensation === undefined
    ? `${handler.kind} step "${handler.step}"`
    : `${handler.kind} compensation "${handler.step}" (of step "${compensation.compensates}")`;
}
