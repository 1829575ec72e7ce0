// Keys as the purity analysis sees them: a key is a function pure over `({ input, steps })`,
// where `steps` holds the outputs of the steps declared before its own. What the analysis
// reports becomes the key's plain-data KeyModel, which the key rules (LF002–LF005) read.

import { ts } from 'ts-morph';
import type { ContextDescription, PurityReport } from '../model/purity.js';
import type { KeyModel } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';

/** The context of the key of a step declared after `earlierSteps` (dsl `KeyContext`). */
export function keyContext(earlierSteps: readonly string[]): ContextDescription {
  return { data: ['input'], steps: { visible: earlierSteps } };
}

/** The model of the key declared by `property`, from the purity report of its function. */
export function keyModel(program: AnalysisProgram, property: ts.ObjectLiteralElementLike, report: PurityReport): KeyModel {
  const text = ts.isPropertyAssignment(property) ? property.initializer.getText() : property.getText();
  const input = report.data['input'];
  return {
    text,
    location: program.location(property.name ?? property),
    inputFields: input?.paths ?? [],
    readsWholeInput: input?.whole ?? false,
    readsAllSteps: report.readsAllSteps,
    stepReads: report.stepReads,
    calls: report.calls,
    dependsOnContext: report.dependsOnContext,
    findings: report.findings,
  };
}
