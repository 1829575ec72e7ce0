import type { Diagnostic } from '../../model/diagnostic.js';
import { describeLocation } from '../../model/source-location.js';
import { eventSenderName } from '../../emit/naming.js';
import { waitedEvents } from '../../model/waited-events.js';
import type { CompensationModel, EventReference, StepModel, WorkflowModel } from '../../model/workflow-model.js';
import type { Rule } from '../rule.js';

/**
 * LF006: a workflow name+version is declared once, a step or compensation name once per workflow, a workflow
 * const name once (the generated registry exports contracts under it), and an event that
 * workflows wait for once (it has one payload schema and one generated sender).
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
    // Steps and compensations share one namespace: each names a handler of the contract and ledger rows.
    const named = new Map<string, StepModel | CompensationModel>();
    for (const step of workflow.steps.flatMap((s) => (s.compensation === undefined ? [s] : [s, s.compensation]))) {
      const earlier = named.get(step.name);
      if (earlier === undefined) {
        named.set(step.name, step);
        continue;
      }
      const first = describeLocation(earlier.location, step.location);
      diagnostics.push({
        code: 'LF006',
        severity: 'error',
        ...step.location,
        message:
          !('compensates' in step) && !('compensates' in earlier)
            ? `step "${step.name}" is declared twice in workflow "${workflow.name}" v${workflow.version} ` +
              `(first at ${first}); step names must be unique within a workflow — rename one.`
            : `${describeNamed(step)} is named like ${describeNamed(earlier)} (at ${first}) in workflow "${workflow.name}" v${workflow.version}; ` +
              'steps and compensations share one namespace (each names a handler of the contract) — rename one.',
      });
    }
  }
  diagnostics.push(...duplicateEvents(analysis.workflows));
  return diagnostics;
};

/** Events waited for that are declared twice, or whose generated senders would share a name. */
function duplicateEvents(workflows: readonly WorkflowModel[]): Diagnostic[] {
  const diagnostics: Diagnostic[] = [];
  const bySender = new Map<string, EventReference>();
  for (const { event } of waitedEvents(workflows)) {
    const sender = eventSenderName(event.name);
    const first = bySender.get(sender);
    if (first === undefined) {
      bySender.set(sender, event);
      continue;
    }
    const firstAt = `\`${first.exportName}\` at ${where(first.location, event.location)}`;
    diagnostics.push({
      code: 'LF006',
      severity: 'error',
      ...event.location,
      message:
        first.name === event.name
          ? `event "${event.name}" is declared twice: here as \`${event.exportName}\` and as ${firstAt}; declare it once and import that const ` +
            'wherever it is waited for, so that it has one payload schema and one generated sender.'
          : `events "${first.name}" (${firstAt}) and "${event.name}" would both be sent with the generated ${sender}(); rename one of them.`,
    });
  }
  return diagnostics;
}

/** `step "charge"`, `compensation "refund" of step "charge"`. */
function describeNamed(step: StepModel | CompensationModel): string {
  return 'compensates' in step ? `compensation "${step.name}" of step "${step.compensates}"` : `step "${step.name}"`;
}

function where(first: WorkflowModel['location'], here: WorkflowModel['location']): string {
  return first.file === here.file ? `line ${first.line}` : `${first.file}:${first.line}:${first.col}`;
}
