import type { Diagnostic } from '../../model/diagnostic.js';
import { describeHops } from '../describe-via.js';
import { visibleSteps } from '../../model/workflow-model.js';
import type { Rule } from '../rule.js';
import { checkedFunctions, wordingOf } from '../step-functions.js';

/**
 * LF003: a key — and every other function the runtime evaluates for a step — may read only steps
 * declared before its own (their outputs exist when it runs). A compensation's key may read the
 * step it undoes too: it runs only once that step's effect is recorded.
 */
export const stepOrder: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const checked of checkedFunctions(input)) {
    if (checked.step === null) continue; // a workflow's partition key and a schedule's input see no steps
    const { workflow, step, fn } = checked;
    const { subject, it } = wordingOf(checked);
    const visible = visibleSteps(workflow, step);
    const earlier = visible.map((s) => s.name);
    const horizon = visible.at(-1)?.position ?? -1;
    const earlierText =
      earlier.length === 0
        ? `it has no earlier steps, so derive ${it} from the input`
        : `earlier steps are: ${earlier.join(', ')}`;
    const evaluated = it === 'it' ? 'it is evaluated' : `${it} is computed`;
    for (const finding of fn.findings) {
      const via = describeHops(finding.at, finding.via);
      let message: string;
      if (finding.kind === 'invisible-step-read') {
        const target = workflow.steps.find((s) => s.name === finding.step);
        if (target === undefined) {
          message = `${subject} reads steps.${finding.step}${via}, but workflow "${workflow.name}" has no step "${finding.step}"; ${earlierText}.`;
        } else if ('compensates' in step) {
          message =
            `${subject} reads steps.${finding.step}${via}, but step "${finding.step}" comes after "${step.compensates}" ` +
            `(position ${target.position + 1}, "${step.compensates}" is ${horizon + 1}), and a compensation runs whether or not later steps ran; ` +
            `derive the key from the input, "${step.compensates}" or the steps before it.`;
        } else if (target.position === step.position) {
          message = `${subject} reads its own output (steps.${finding.step})${via}; ${evaluated} before the step runs — derive it from the input or earlier steps.`;
        } else {
          message =
            `${subject} reads steps.${finding.step}${via}, but step "${finding.step}" comes after it ` +
            `(position ${target.position + 1}, this step is ${step.position + 1}) and has no output yet; move "${finding.step}" before "${step.name}" or derive ${it} from earlier steps.`;
        }
      } else if (finding.kind === 'dynamic-step-access') {
        message =
          `${subject} reads steps with a computed name (${finding.text})${via}; ` +
          `codegen cannot tell which step that is — write steps.<name> with a literal name (${earlierText}).`;
      } else {
        continue;
      }
      diagnostics.push({ code: 'LF003', severity: 'error', ...finding.at, message });
    }
  }
  return diagnostics;
};
