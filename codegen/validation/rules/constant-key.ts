import type { Diagnostic } from '../../model/diagnostic.js';
import { keyedSteps, type Rule } from '../rule.js';

/** LF005 (warning): a key that reads neither input nor steps is the same for every run. */
export const constantKey: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const { step, key } of keyedSteps(input)) {
    if (key.dependsOnContext) continue;
    diagnostics.push({
      code: 'LF005',
      severity: 'warning',
      ...key.location,
      message:
        `key of step "${step.name}" is constant: it reads neither the input nor earlier steps, so every run shares one key ` +
        `and only the first run's effect ever happens; include a business identifier, e.g. \`${step.name}:\${input.<id>}\`.`,
    });
  }
  return diagnostics;
};
