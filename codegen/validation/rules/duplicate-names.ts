import type { Diagnostic } from '../../model/diagnostic.js';
import { describeLocation } from '../../model/source-location.js';
import type { WorkflowModel } from '../../model/workflow-model.js';
import type { Rule } from '../rule.js';

/**
 * LF006: a workflow name+version is declared once, a step name once per workflow, and a
 * workflow const name once (the generated registry exports contracts under it).
 */
export const duplicateNames: Rule = ({ analysis }) => {
  const diagnostics: Diagnostic[] = [];
  const byVersion = new Map<string, WorkflowModel>();
  const byExport = new Map<string, WorkflowModel>();
  for (const workflow of analysis.workflows) {
    const id = `${workflow.name}@${workflow.version}`;
    const first = byVersion.get(id);
    if (first === undefined) {
      byVersion.set(id, workflow);
    } else {
      diagnostics.push({
        code: 'LF006',
        severity: 'error',
        ...workflow.location,
        message:
          `workflow "${workflow.name}" v${workflow.version} is already declared at ${where(first.location, workflow.location)}; ` +
          'rename one of them, or give this one the next version.',
      });
      continue;
    }
    const sameExport = byExport.get(workflow.exportName);
    if (sameExport === undefined) {
      byExport.set(workflow.exportName, workflow);
    } else {
      diagnostics.push({
        code: 'LF006',
        severity: 'error',
        ...workflow.location,
        message:
          `the workflow const \`${workflow.exportName}\` is also declared at ${where(sameExport.location, workflow.location)} ` +
          `("${sameExport.name}" v${sameExport.version}); generated contracts are named after it, so rename one of the consts.`,
      });
    }
    const steps = new Map<string, WorkflowModel['steps'][number]>();
    for (const step of workflow.steps) {
      const earlier = steps.get(step.name);
      if (earlier === undefined) {
        steps.set(step.name, step);
        continue;
      }
      diagnostics.push({
        code: 'LF006',
        severity: 'error',
        ...step.location,
        message:
          `step "${step.name}" is declared twice in workflow "${workflow.name}" v${workflow.version} ` +
          `(first at ${describeLocation(earlier.location, step.location)}); step names must be unique within a workflow — rename one.`,
      });
    }
  }
  return diagnostics;
};

function where(first: WorkflowModel['location'], here: WorkflowModel['location']): string {
  return first.file === here.file ? `line ${first.line}` : `${first.file}:${first.line}:${first.col}`;
}
