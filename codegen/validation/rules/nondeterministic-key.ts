import type { Diagnostic } from '../../model/diagnostic.js';
import type { NondeterministicSource } from '../../model/workflow-model.js';
import { describeOrigin } from '../describe-via.js';
import { keyedSteps, type Rule } from '../rule.js';

const FROM_IDENTIFIERS =
  'build the key from business identifiers in the input (e.g. input.orderId), or create the value in an earlier step and read it from steps';
const FROM_EARLIER_STEP = 'keys are synchronous and pure: load what you need in an earlier step and read its output from steps';

const SOURCES: Record<NondeterministicSource, { readonly what: string; readonly fix: string }> = {
  clock: { what: 'reads the clock', fix: "pass the time in the workflow input or take it from an earlier step's output" },
  random: { what: 'uses randomness', fix: FROM_IDENTIFIERS },
  uuid: { what: 'generates a random UUID', fix: FROM_IDENTIFIERS },
  env: { what: 'reads the process environment', fix: 'put the value in the workflow input; read configuration in handlers, not in keys' },
  await: { what: 'awaits', fix: FROM_EARLIER_STEP },
  io: { what: 'does I/O', fix: FROM_EARLIER_STEP },
};

/** LF002: a key must not read the clock, randomness, the environment or I/O, nor call anything not known pure. */
export const nondeterministicKey: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const { step, key } of keyedSteps(input)) {
    for (const finding of key.findings) {
      const origin = describeOrigin(finding.text, finding.at, finding.origin, finding.via);
      if (finding.kind === 'nondeterministic') {
        const source = SOURCES[finding.source];
        diagnostics.push({
          code: 'LF002',
          severity: 'error',
          ...finding.at,
          message:
            `key of step "${step.name}" ${source.what} (${origin}), so a retry could compute another key and repeat the effect; ` +
            `${source.fix}.`,
        });
      } else if (finding.kind === 'impure-call') {
        const callee = describeOrigin(finding.callee, finding.at, finding.origin, finding.via);
        diagnostics.push({
          code: 'LF002',
          severity: 'error',
          ...finding.at,
          message:
            `key of step "${step.name}" calls ${callee}, which is not on codegen's allow-list of pure functions; ` +
            'build the key with template literals, String(), Number(), JSON.stringify(), Math.floor() and string/number methods, ' +
            'or a helper function declared in this file that uses only those.',
        });
      }
    }
  }
  return diagnostics;
};
