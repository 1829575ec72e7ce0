import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { chargeKey } from './keys.js';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => chargeKey(input.orderId),
    idempotentByKey: true,
  });
