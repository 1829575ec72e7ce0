import type { Diagnostic } from '../../model/diagnostic.js';
import { keyedSteps, type Rule } from '../rule.js';
import { keySubject } from '../step-functions.js';

/**
 * LF005: a key that reads neither input nor steps is the same for every run. An `external` step's
 * key (and its compensation's) is what the provider sees: a provider that dedupes by key applies
 * the effect for the first run only and answers every later run with that result, so there it is
 * an error. A `transactional` key is scoped to its run in the ledger, and a child's dedupe key to
 * its parent: there it stays a warning. A forEach key that does not read its item is LF013
 * instead, which says more.
 */
export const constantKey: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const { step, key } of keyedSteps(input)) {
    if (key.dependsOnContext || step.kind === 'forEach') continue;
    if (step.kind === 'external') {
      diagnostics.push({
        code: 'LF005',
        severity: 'error',
        ...key.location,
        message:
          `${keySubject(step)} is constant: it reads neither the input nor earlier steps, so every run sends the provider the same key, ` +
          `and a provider that dedupes by key applies the first run's effect and answers every later run with its result; ` +
          `include a business identifier, e.g. \`${step.name}:\${input.<id>}\`.`,
      });
      continue;
    }
    const why =
      step.kind === 'child'
        ? "so every run shares one key and only the first run's child run is ever started (the others' starts conflict with it)"
        : 'so every run has the same key; the ledger scopes a transactional key to its run, so each run still writes once, but the key names nothing the effect is about';
    diagnostics.push({
      code: 'LF005',
      severity: 'warning',
      ...key.location,
      message:
        `${keySubject(step)} is constant: it reads neither the input nor earlier steps, ${why}; ` +
        `include a business identifier, e.g. \`${step.name}:\${input.<id>}\`.`,
    });
  }
  return diagnostics;
};
