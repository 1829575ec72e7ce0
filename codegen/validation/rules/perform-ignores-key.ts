import type { Diagnostic } from '../../model/diagnostic.js';
import { stepsAndCompensations } from '../../model/workflow-model.js';
import { handlerSubject, type Rule } from '../rule.js';

/**
 * LF012 (warning): an `external` handler's `perform` never reads `ctx.key` — neither as
 * `ctx.key` nor destructured — and hands its context to nothing that could. The key is what
 * makes a retry the same request to the provider (or findable by `reconcile`).
 */
export const performIgnoresKey: Rule = (input) => {
  const { analysis } = input;
  const diagnostics: Diagnostic[] = [];
  for (const binding of analysis.handlers?.bindings ?? []) {
    const workflow = analysis.workflows.find((w) => w.name === binding.workflow && w.version === binding.version);
    for (const handler of binding.handlers) {
      if (handler.kind !== 'external' || handler.effects.readsKey) continue;
      const idempotentByKey =
        (workflow === undefined ? [] : stepsAndCompensations(workflow)).find((s) => s.name === handler.step)
          ?.idempotentByKey ?? false;
      const fix = idempotentByKey
        ? 'send it to the provider as its idempotency key (e.g. the Idempotency-Key header), so a retry after a crash returns the first effect instead of making a second'
        : 'store it with the effect at the provider (e.g. as its reference or metadata), so reconcile can find the effect by key after a crash';
      diagnostics.push({
        code: 'LF012',
        severity: 'warning',
        ...handler.location,
        message: `perform of ${handlerSubject(input, binding, handler)} never reads ctx.key; ${fix}.`,
      });
    }
  }
  return diagnostics;
};
