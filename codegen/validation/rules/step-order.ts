import type { Diagnostic } from '../../model/diagnostic.js';
import { describeHops } from '../describe-via.js';
import { keyedSteps, type Rule } from '../rule.js';

/** LF003: a key may read only steps declared before its own step (their outputs exist when it runs). */
export const stepOrder: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const { workflow, step, key } of keyedSteps(input)) {
    const earlier = workflow.steps.filter((s) => s.position < step.position).map((s) => s.name);
    const earlierText = earlier.length === 0 ? 'it has no earlier steps, so derive the key from the input' : `earlier steps are: ${earlier.join(', ')}`;
    for (const read of key.stepReads) {
      const via = describeHops(read.at, read.via);
      const target = workflow.steps.find((s) => s.name === read.step);
      let message: string;
      if (target === undefined) {
        message = `key of step "${step.name}" reads steps.${read.step}${via}, but workflow "${workflow.name}" has no step "${read.step}"; ${earlierText}.`;
      } else if (target.position === step.position) {
        message = `key of step "${step.name}" reads its own output (steps.${read.step})${via}; the key is computed before the step runs — derive it from the input or earlier steps.`;
      } else if (target.position > step.position) {
        message =
          `key of step "${step.name}" reads steps.${read.step}${via}, but step "${read.step}" comes after it ` +
          `(position ${target.position + 1}, this step is ${step.position + 1}) and has no output yet; move "${read.step}" before "${step.name}" or derive the key from earlier steps.`;
      } else {
        continue;
      }
      diagnostics.push({ code: 'LF003', severity: 'error', ...read.at, message });
    }
    for (const finding of key.findings) {
      if (finding.kind !== 'dynamic-step-access') continue;
      diagnostics.push({
        code: 'LF003',
        severity: 'error',
        ...finding.at,
        message:
          `key of step "${step.name}" reads steps with a computed name (${finding.text})${describeHops(finding.at, finding.via)}; ` +
          `codegen cannot tell which step that is — write steps.<name> with a literal name (${earlierText}).`,
      });
    }
  }
  return diagnostics;
};
