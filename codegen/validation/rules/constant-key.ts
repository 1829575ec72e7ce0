import type { Diagnostic } from '../../model/diagnostic.js';
import { keyedSteps, type Rule } from '../rule.js';
import { keySubject } from '../step-functions.js';

/**
 * LF005 (warning): a key that reads neither input nor steps is the same for every run. A forEach
 * key that does not read its item is LF013 instead, which says more.
 */
export const constantKey: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const { step, key } of keyedSteps(input)) {
    if (key.dependsOnContext || step.kind === 'forEach') continue;
    const what = step.kind === 'child' ? 'child run is ever started' : 'effect ever happens';
    diagnostics.push({
      code: 'LF005',
      severity: 'warning',
      ...key.location,
      message:
        `${keySubject(step)} is constant: it reads neither the input nor earlier steps, so every run shares one key ` +
        `and only the first run's ${what}; include a business identifier, e.g. \`${step.name}:\${input.<id>}\`.`,
    });
  }
  return diagnostics;
};
