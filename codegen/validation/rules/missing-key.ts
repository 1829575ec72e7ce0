import type { Diagnostic } from '../../model/diagnostic.js';
import type { Rule } from '../rule.js';

const CONSEQUENCE = {
  transactional: 'a retry reuses the ledger row instead of writing twice',
  external: 'a retry or a crash after the call never performs the effect twice',
} as const;

/** LF001: every `transactional` and `external` step needs a key. */
export const missingKey: Rule = ({ analysis }) => {
  const diagnostics: Diagnostic[] = [];
  for (const workflow of analysis.workflows) {
    for (const step of workflow.steps) {
      if (step.kind === 'step' || step.key !== null) continue;
      diagnostics.push({
        code: 'LF001',
        severity: 'error',
        ...step.location,
        message:
          `${step.kind} step "${step.name}" has no key; add key: ({ input }) => \`${step.name}:\${input.<id>}\` ` +
          `(built from the input or earlier steps) so that ${CONSEQUENCE[step.kind]}.`,
      });
    }
  }
  return diagnostics;
};
