import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    // ledgerflow-ignore LF099: a code that does not exist
    key: ({ input }) => `charge:${input.orderId}`,
  });
