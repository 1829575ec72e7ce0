import type { Diagnostic } from '../../model/diagnostic.js';
import { describeLocation } from '../../model/source-location.js';
import type { KeyFinding } from '../../model/workflow-model.js';
import { describeHops } from '../describe-via.js';
import type { Rule } from '../rule.js';
import { checkedFunctions, wordingOf, type FunctionWording } from '../step-functions.js';

type MutableRead = Extract<KeyFinding, { kind: 'mutable-read' }>;

/**
 * LF004: a key — and every other function the runtime evaluates for a step or a run, and a
 * schedule's input — reads only its context (input, earlier steps; a forEach item; a schedule's
 * scheduledAt) — no mutable module state, globals or unknown imports.
 */
export const mutableKeyRead: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const checked of checkedFunctions(input)) {
    const wording = wordingOf(checked);
    for (const finding of checked.fn.findings) {
      if (finding.kind !== 'mutable-read') continue;
      diagnostics.push({
        code: 'LF004',
        severity: 'error',
        ...finding.at,
        message: `${wording.subject} ${describe(finding, wording)}`,
      });
    }
  }
  return diagnostics;
};

function describe(finding: MutableRead, wording: FunctionWording): string {
  const via = describeHops(finding.at, finding.via);
  const declaredAt = describeLocation(finding.origin, finding.at);
  // Inside an existing parenthesis, the hops read better as a clause than as a second parenthesis.
  const declared = via === '' ? declaredAt : `${declaredAt}, ${via.slice(2, -1)}`;
  switch (finding.reason) {
    case 'module-let':
      return `reads module-level \`${finding.binding}\` (declared at ${declared}), which can change between retries and differs between workers; make it a const, or ${wording.supply}.`;
    case 'outer-variable':
      return `reads \`${finding.binding}\` (declared at ${declared}) from outside ${wording.noun}, which codegen cannot prove constant; ${wording.supply}.`;
    case 'imported-let':
      return `reads \`${finding.binding}\`${via}, which '${finding.module}' exports as a mutable \`let\` (${declaredAt}); export a const instead, or ${wording.supply}.`;
    case 'import':
      return `reads \`${finding.binding}\` imported from '${finding.module}'${via}, which codegen cannot prove constant; ${wording.supply}, or declare it as a const in this file.`;
    case 'global':
      return `reads the global \`${finding.binding}\`${via}, which is ${wording.readable}; ${wording.supply}.`;
    case 'this':
      return `reads \`this\`${via}; ${wording.isKey ? 'a key' : 'it'} may only read its ${wording.argument} argument.`;
    case 'closure':
      return `uses \`${finding.binding}\` (declared at ${declared}), closure state that can change from one call to the next; ${wording.supply}, or compute it from ${wording.argument} alone.`;
    case 'class':
      return `reads class \`${finding.binding}\` (declared at ${declared}), whose static state any code can change; use a const declared \`as const\`, or ${wording.supply}.`;
    case 'mutable-instance':
      return `reads \`${finding.binding}\`, a module-level instance (declared at ${declared}) whose state changes as code uses it (a Map, a Set, a class instance, a /g or /y regular expression's lastIndex); build it inside ${wording.noun}, or ${wording.supply}.`;
    case 'mutable-object':
      return `reads \`${finding.binding}\`, a module-level object or array (declared at ${declared}) that any code can mutate; declare it \`as const\`, or ${wording.supply}.`;
  }
}
