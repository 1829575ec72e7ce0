import type { Diagnostic } from '../../model/diagnostic.js';
import { partId } from '../../model/pinned-parts.js';
import type { Rule } from '../rule.js';

/**
 * LF014: a compensation's key must differ from the key of the step it undoes: a provider that
 * dedupes by key would take the undo for a replay and hand back the charge instead of making
 * the refund, and anything keyed by it could not tell the write from its undo. Keys are
 * compared by value where analysis could fold both into literal text and context paths
 * (KeyModel.value: templates, `+`, `String()`, `[...].join()`, named constants, destructured
 * parameters — so `'charge:' + input.orderId` is `` `charge:${input.orderId}` ``); otherwise by
 * their pinned source (comments, formatting and the declarations they use aside).
 */
export const compensationKey: Rule = ({ analysis }) => {
  const diagnostics: Diagnostic[] = [];
  for (const workflow of analysis.workflows) {
    const hashes = new Map(workflow.parts.map((part) => [partId(part), part.hash]));
    for (const step of workflow.steps) {
      const compensation = step.compensation;
      if (
        compensation === undefined ||
        compensation.key === null ||
        step.key === null ||
        (step.kind !== 'transactional' && step.kind !== 'external')
      )
        continue;
      const stepKey = hashes.get(partId({ kind: 'key', step: step.name }));
      const undoKey = hashes.get(partId({ kind: 'key', step: compensation.name }));
      const stepValue = step.key.value;
      const undoValue = compensation.key.value;
      const same =
        stepValue != null && undoValue != null
          ? JSON.stringify(stepValue) === JSON.stringify(undoValue)
          : stepKey !== undefined && undoKey !== undefined
            ? stepKey === undoKey
            : normalized(step.key.text) === normalized(compensation.key.text);
      if (!same) continue;
      diagnostics.push({
        code: 'LF014',
        severity: 'error',
        ...compensation.key.location,
        message:
          `the key of compensation "${compensation.name}" is the key of step "${step.name}" (${step.key.text})` +
          `${normalized(step.key.text) === normalized(compensation.key.text) ? '' : `, spelled differently (${compensation.key.text.replace(/\s+/g, ' ')}) with the same value`}; ${SHARED_KEY[step.kind]} — ` +
          `give it its own, e.g. \`${compensation.name}:\${input.<id>}\`.`,
      });
    }
  }
  return diagnostics;
};

/** What goes wrong when an undo shares its step's key. */
const SHARED_KEY: Readonly<Record<'transactional' | 'external', string>> = {
  external:
    "a provider that dedupes by key would take the undo for a replay of the call and return the first call's result instead of undoing it",
  transactional:
    'the write and its undo would share one idempotency key, so nothing keyed by it (a unique index, an audit row) could tell them apart',
};

function normalized(text: string): string {
  return text.replace(/\s+/g, '');
}
