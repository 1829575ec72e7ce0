import type { Diagnostic } from '../../model/diagnostic.js';
import { partId } from '../../model/pinned-parts.js';
import type { Rule } from '../rule.js';

/**
 * LF014: a compensation's key must differ from the key of the step it undoes. Both are ledger
 * rows of the same run; under one key the undo would read as a replay of the effect — and a
 * provider that dedupes by key would hand back the charge instead of making the refund. Keys are
 * compared by their pinned source (comments, formatting and the declarations they use
 * included), so two spellings of one key are not caught: make the difference a prefix.
 */
export const compensationKey: Rule = ({ analysis }) => {
  const diagnostics: Diagnostic[] = [];
  for (const workflow of analysis.workflows) {
    const hashes = new Map(workflow.parts.map((part) => [partId(part), part.hash]));
    for (const step of workflow.steps) {
      const compensation = step.compensation;
      if (compensation?.key == null || step.key === null) continue;
      const stepKey = hashes.get(partId({ kind: 'key', step: step.name }));
      const undoKey = hashes.get(partId({ kind: 'key', step: compensation.name }));
      const same = stepKey !== undefined && undoKey !== undefined ? stepKey === undoKey : normalized(step.key.text) === normalized(compensation.key.text);
      if (!same) continue;
      diagnostics.push({
        code: 'LF014',
        severity: 'error',
        ...compensation.key.location,
        message:
          `the key of compensation "${compensation.name}" is the key of step "${step.name}" (${step.key.text}); under one key the ` +
          `undo would count as a replay of the effect (a provider that dedupes by key returns the first ${step.kind === 'external' ? 'call' : 'write'} instead of undoing it) — ` +
          `give it its own, e.g. \`${compensation.name}:\${input.<id>}\`.`,
      });
    }
  }
  return diagnostics;
};

function normalized(text: string): string {
  return text.replace(/\s+/g, '');
}
