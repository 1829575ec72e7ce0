import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    // ledgerflow-ignore LF002: the key once read the clock; it no longer does
    key: ({ input }) => `charge:${input.orderId}`,
  })
  .external('sendDigest', {
    output: z.object({ messageId: z.string() }),
    // ledgerflow-ignore LF005: one digest a day for the whole shop, deduped by the provider on purpose
    // ledgerflow-ignore LF004: stacked above the same line, it has nothing to suppress there
    key: () => 'daily-digest',
  });
