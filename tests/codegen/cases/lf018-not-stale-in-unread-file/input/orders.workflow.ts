import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

function keyFor(prefix: string) {
  return ({ input }: { input: { orderId: string } }) => `${prefix}:${input.orderId}`;
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .external('sendDigest', {
    output: z.object({ messageId: z.string() }),
    // ledgerflow-ignore LF005: one digest a day for the whole shop, deduped by the provider on purpose
    key: () => 'daily-digest',
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: keyFor('charge'),
  });
