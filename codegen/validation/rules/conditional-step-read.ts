import type { Diagnostic } from '../../model/diagnostic.js';
import type { Rule } from '../rule.js';
import { checkedFunctions, wordingOf } from '../step-functions.js';

/**
 * LF017: a key that reads the output of a step with a `when` condition gets `undefined` for every
 * run that skipped the step. That key is stable (the skip is recorded and never re-decided) but
 * almost certainly wrong: every skipped run gets the same "…:undefined" key, or the key function
 * throws on `undefined.id` and the attempt fails. The read is accepted when the key says what to
 * use instead — `steps.x?.id ?? 'none'`, `steps.x ? … : …`, a test of `steps.x` — or when its own
 * step has the same condition (it runs only when the step ran). A compensation may read the step
 * it undoes (it runs only if that step's effect was recorded).
 */
export const conditionalStepRead: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const checked of checkedFunctions(input)) {
    if (checked.part !== 'key' || checked.workflow === null) continue;
    const reads = checked.fn.values?.conditionalReads ?? [];
    if (reads.length === 0) continue;
    const { subject } = wordingOf(checked);
    for (const read of reads) {
      diagnostics.push({
        code: 'LF017',
        severity: 'error',
        ...read.at,
        message:
          `${subject} reads \`${read.text}\`, the output of step "${read.step}", which has a condition (when): for every run that skipped ` +
          `"${read.step}" it is undefined, so all of them get one key (e.g. "…:undefined") or the key fails; say what to use then ` +
          `(\`steps.${read.step}?.<field> ?? 'none'\`), give this step the same condition, or derive the key from the input.`,
      });
    }
  }
  return diagnostics;
};
