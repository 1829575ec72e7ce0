import type { Diagnostic } from '../../model/diagnostic.js';
import { describeOrigin } from '../describe-via.js';
import { handlerSubject, type Rule } from '../rule.js';

/**
 * LF010: a `transactional` handler writes through something that provably is not `ctx.tx` — a
 * database handle from its closure or module, or a connection or transaction opened on one.
 * Writes through a handle the analysis cannot trace (a callback's parameter, what a call that was
 * given the context returned) are left alone.
 */
export const writeOutsideTx: Rule = (input) => {
  const { analysis } = input;
  const diagnostics: Diagnostic[] = [];
  for (const binding of analysis.handlers?.bindings ?? []) {
    for (const handler of binding.handlers) {
      if (handler.kind !== 'transactional') continue;
      for (const write of handler.effects.writes) {
        if (write.through !== 'outside') continue;
        const origin = describeOrigin(write.text, write.at, write.origin, write.via);
        const what =
          write.what === 'transaction'
            ? `opens a transaction of its own on ${write.handle} (${origin}) beside ctx.tx`
            : `writes through ${write.handle} (${origin}), not through ctx.tx`;
        diagnostics.push({
          code: 'LF010',
          severity: 'error',
          ...write.at,
          message:
            `${handlerSubject(input, binding, handler)} ${what}; write through ctx.tx so the write commits with the ledger row — ` +
            'a write through another connection commits on its own, stays when the step fails and is repeated when it is retried.',
        });
      }
    }
  }
  return diagnostics;
};
