import type { Diagnostic } from '../model/diagnostic.js';
import type { CommittedManifest } from '../model/manifest.js';
import { stepsAndCompensations, type AnalysisResult, type CompensationModel, type KeyModel, type StepModel, type WorkflowModel } from '../model/workflow-model.js';

export interface ValidationInput {
  readonly analysis: AnalysisResult;
  readonly committedManifest: CommittedManifest;
}

/** One rule (an LFnnn code of the README's table): reads the model, returns its diagnostics. */
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
