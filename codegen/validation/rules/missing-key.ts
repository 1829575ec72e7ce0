import type { StepKind } from '../../../dsl/step-kind.js';
import type { Diagnostic } from '../../model/diagnostic.js';
import { stepsAndCompensations } from '../../model/workflow-model.js';
import type { Rule } from '../rule.js';

/** What the key buys each kind that needs one; null for the kinds that take none. */
const CONSEQUENCE: Readonly<Record<StepKind, string | null>> = {
  step: null,
  transactional: 'a retry reuses the ledger row instead of writing twice',
  external: 'a retry or a crash after the call never performs the effect twice',
  sleep: null,
  waitFor: null,
  child: 'a retry or a crash after starting the child never starts it twice',
  forEach: "each item's child is started once, whatever crashes in between",
};

/** LF001: every `transactional`, `external`, `child` and `forEach` step needs a key, and so does every compensation. */
export const missingKey: Rule = ({ analysis }) => {
  const diagnostics: Diagnostic[] = [];
  for (const workflow of analysis.workflows) {
    for (const step of stepsAndCompensations(workflow)) {
      const consequence = CONSEQUENCE[step.kind];
      if (consequence === null || step.key !== null) continue;
      if ('compensates' in step) {
        diagnostics.push({
          code: 'LF001',
          severity: 'error',
          ...step.location,
          message:
            `compensation "${step.name}" of ${step.kind} step "${step.compensates}" has no key; add key: ({ input, steps }) => \`${step.name}:\${input.<id>}\` ` +
            `(built from the input, "${step.compensates}" or earlier steps, and different from the step's) so that ${consequence}.`,
        });
        continue;
      }
      const example =
        step.kind === 'forEach'
          ? `add key: ({ input, item }) => \`${step.name}:\${input.<id>}:\${item.<id>}\` (built from the item and the input or earlier steps)`
          : `add key: ({ input }) => \`${step.name}:\${input.<id>}\` (built from the input or earlier steps)`;
      diagnostics.push({
        code: 'LF001',
        severity: 'error',
        ...step.location,
        message: `${step.kind} step "${step.name}" has no key; ${example} so that ${consequence}.`,
      });
    }
  }
  return diagnostics;
};
