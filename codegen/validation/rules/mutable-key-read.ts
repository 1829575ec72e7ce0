import type { Diagnostic } from '../../model/diagnostic.js';
import { describeLocation } from '../../model/source-location.js';
import type { KeyFinding } from '../../model/workflow-model.js';
import { describeHops } from '../describe-via.js';
import { keyedSteps, type Rule } from '../rule.js';

type MutableRead = Extract<KeyFinding, { kind: 'mutable-read' }>;

/** LF004: a key reads only its input and earlier steps — no mutable module state, globals or unknown imports. */
export const mutableKeyRead: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const { step, key } of keyedSteps(input)) {
    for (const finding of key.findings) {
      if (finding.kind !== 'mutable-read') continue;
      diagnostics.push({
        code: 'LF004',
        severity: 'error',
        ...finding.at,
        message: `key of step "${step.name}" ${describe(finding)}`,
      });
    }
  }
  return diagnostics;
};

function describe(finding: MutableRead): string {
  const via = describeHops(finding.at, finding.via);
  const declaredAt = describeLocation(finding.origin, finding.at);
  // Inside an existing parenthesis, the hops read better as a clause than as a second parenthesis.
  const declared = via === '' ? declaredAt : `${declaredAt}, ${via.slice(2, -1)}`;
  switch (finding.reason) {
    case 'module-let':
      return `reads module-level \`${finding.binding}\` (declared at ${declared}), which can change between retries and differs between workers; make it a const, or pass the value in the workflow input.`;
    case 'outer-variable':
      return `reads \`${finding.binding}\` (declared at ${declared}) from outside the key, which codegen cannot prove constant; pass the value in the workflow input.`;
    case 'imported-let':
      return `reads \`${finding.binding}\`${via}, which '${finding.module}' exports as a mutable \`let\` (${declaredAt}); export a const instead, or pass the value in the workflow input.`;
    case 'import':
      return `reads \`${finding.binding}\` imported from '${finding.module}'${via}, which codegen cannot prove constant; pass the value in the workflow input, or declare it as a const in this file.`;
    case 'global':
      return `reads the global \`${finding.binding}\`${via}, which is neither input nor an earlier step; pass the value in the workflow input.`;
    case 'this':
      return `reads \`this\`${via}; a key may only read its ({ input, steps }) argument.`;
    case 'mutable-object':
      return `reads \`${finding.binding}\`, a module-level object or array (declared at ${declared}) that any code can mutate; declare it \`as const\`, or pass the value in the workflow input.`;
  }
}
