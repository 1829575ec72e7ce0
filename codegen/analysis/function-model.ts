// The functions the runtime evaluates for a step as the purity analysis sees them: each is pure
// over `({ input, steps })`, where `steps` holds the outputs of the steps declared before its own
// (plus `item` and `index` for a `forEach` step's per-item key and input); a workflow's partition
// key, evaluated for the whole run, over `({ input })`; a schedule's input, evaluated for each
// tick, over `({ scheduledAt })`. What the analysis reports becomes the
// function's plain-data FunctionModel, which the rules LF002–LF005 and LF013 read.

import { ts } from 'ts-morph';
import type { ContextDescription, PurityReport } from '../model/purity.js';
import type { FunctionModel } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';

/**
 * The context of a function of a step declared after `earlierSteps` (dsl `KeyContext`), or with
 * `perItem` of a `forEach` step's key or input (dsl `ItemContext`).
 */
export function functionContext(earlierSteps: readonly string[], perItem = false): ContextDescription {
  return { data: perItem ? ['input', 'item', 'index'] : ['input'], steps: { visible: earlierSteps } };
}

/** The context of a function the runtime evaluates for a whole run: a workflow's partition key sees its input only (dsl `WorkflowOptions.queue`). */
export function runContext(): ContextDescription {
  return { data: ['input'], steps: null };
}

/** The context of a schedule's `input`, evaluated by a worker for each tick (dsl `ScheduleContext`). */
export function scheduleContext(): ContextDescription {
  return { data: ['scheduledAt'], steps: null };
}

/** The model of the function declared by `property`, from its purity report. */
export function functionModel(
  program: AnalysisProgram,
  property: ts.ObjectLiteralElementLike,
  report: PurityReport,
): FunctionModel {
  const text = ts.isPropertyAssignment(property) ? property.initializer.getText() : property.getText();
  const input = report.data['input'];
  const item = report.data['item'];
  return {
    text,
    location: program.location(property.name ?? property),
    inputFields: input?.paths ?? [],
    readsWholeInput: input?.whole ?? false,
    readsAllSteps: report.readsAllSteps,
    stepReads: report.stepReads,
    readsItem: item !== undefined && (item.whole || item.paths.length > 0),
    calls: report.calls,
    dependsOnContext: report.dependsOnContext,
    findings: report.findings,
  };
}
