import type { Diagnostic } from '../../model/diagnostic.js';
import { keyedSteps, type Rule } from '../rule.js';

/**
 * LF013: a `forEach` key must read its `item`. Each child run is started once per key; a key
 * that does not tell the items apart gives several of them one key, and the run cannot start a
 * child for each (the index alone names a place in the list, not what is there).
 */
export const forEachKeyIgnoresItem: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const { step, key } of keyedSteps(input)) {
    if (step.kind !== 'forEach' || key.readsItem) continue;
    diagnostics.push({
      code: 'LF013',
      severity: 'error',
      ...key.location,
      message:
        `key of forEach step "${step.name}" does not read item, so different items can get the same key and cannot each have ` +
        `their own child run; derive the key from the item, e.g. key: ({ input, item }) => \`${step.name}:\${input.<id>}:\${item.<id>}\`.`,
    });
  }
  return diagnostics;
};
