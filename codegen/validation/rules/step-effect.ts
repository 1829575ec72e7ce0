import type { Diagnostic } from '../../model/diagnostic.js';
import type { ClientCall, HandlerBindingModel } from '../../model/handler-model.js';
import { describeLocation } from '../../model/source-location.js';
import { describeOrigin } from '../describe-via.js';
import type { Rule } from '../rule.js';

/**
 * LF011: a `step` handler writes to the database (an error: a write is provable from the code) or
 * calls, through a client object, a system an `external` step of the same workflow calls in its
 * `perform`, or calls `fetch` (warnings: the call may only read). Steps run at least once.
 */
export const stepEffect: Rule = ({ analysis }) => {
  const diagnostics: Diagnostic[] = [];
  for (const binding of analysis.handlers?.bindings ?? []) {
    const externalClients = clientsOfPerforms(binding);
    for (const handler of binding.handlers) {
      if (handler.kind !== 'step') continue;
      const { writes, clientCalls, fetches } = handler.effects;
      for (const write of writes) {
        // Opening a transaction is not a write by itself (a step may read a consistent snapshot);
        // the writes made in it are found on their own.
        if (write.what !== 'statement') continue;
        diagnostics.push({
          code: 'LF011',
          severity: 'error',
          ...write.at,
          message:
            `step "${handler.step}" writes to the database (${describeOrigin(write.text, write.at, write.origin, write.via)}); ` +
            'steps run at least once, so the write can happen twice — move it into a transactional step and write through ctx.tx.',
        });
      }
      for (const call of clientCalls) {
        const external = externalClients.find((c) => sameClient(c.call.client, call.client));
        if (external === undefined) continue;
        const performCall = `${external.call.text} at ${describeLocation(external.call.origin, call.at)}`;
        diagnostics.push({
          code: 'LF011',
          severity: 'warning',
          ...call.at,
          message:
            `step "${handler.step}" calls ${describeOrigin(call.text, call.at, call.origin, call.via)}, through the client ` +
            `external step "${external.step}" calls in its perform (${performCall}); steps run at least once, so a call with an ` +
            'effect can happen twice — if this one has an effect, move it into an external step with a key.',
        });
      }
      for (const fetch of fetches) {
        diagnostics.push({
          code: 'LF011',
          severity: 'warning',
          ...fetch.at,
          message:
            `step "${handler.step}" calls ${describeOrigin(fetch.text, fetch.at, fetch.origin, fetch.via)}; steps run at least ` +
            'once, so a request with an effect can be sent twice — if it has one, move the call into an external step with a key.',
        });
      }
    }
  }
  return diagnostics;
};

/**
 * The clients the `perform`s of a binding's external steps wait for, except the objects any
 * handler of the binding uses as a database (reads through the database are what steps are for).
 */
function clientsOfPerforms(binding: HandlerBindingModel): { call: ClientCall; step: string }[] {
  const databases = new Set(binding.handlers.flatMap((h) => h.effects.databaseClients));
  const clients: { call: ClientCall; step: string }[] = [];
  for (const handler of binding.handlers) {
    if (handler.kind !== 'external') continue;
    for (const call of handler.effects.clientCalls) {
      if (!call.awaited || [...databases].some((db) => sameClient(db, call.client))) continue;
      if (!clients.some((c) => c.call.client === call.client)) clients.push({ call, step: handler.step });
    }
  }
  return clients;
}

/** One object is the other or a member of it (`services.payments` and `services.payments.refunds`). */
function sameClient(a: string, b: string): boolean {
  return a === b || a.startsWith(`${b}.`) || b.startsWith(`${a}.`);
}
