import type { Diagnostic } from '../model/diagnostic.js';
import type { CommittedManifest } from '../model/manifest.js';
import type { AnalysisResult, KeyModel, StepModel, WorkflowModel } from '../model/workflow-model.js';

export interface ValidationInput {
  readonly analysis: AnalysisResult;
  readonly committedManifest: CommittedManifest;
}

/** One rule (an LFnnn code of the README's table): reads the model, returns its diagnostics. */
export type Rule = (input: ValidationInput) => Diagnostic[];

/** Every keyed step, with its workflow: what the key rules iterate over. */
export function* keyedSteps(
  input: ValidationInput,
): Generator<{ workflow: WorkflowModel; step: StepModel; key: KeyModel }> {
  for (const workflow of input.analysis.workflows) {
    for (const step of workflow.steps) {
      if (step.key !== null) yield { workflow, step, key: step.key };
    }
  }
}
