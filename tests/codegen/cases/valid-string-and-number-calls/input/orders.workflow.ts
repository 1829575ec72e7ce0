import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) =>
      [
        String(input.orderId).trim().toLowerCase(),
        Number(input.amountCents / 100).toFixed(2).padStart(10, '0'),
        input.email.slice(0, 3).toUpperCase(),
      ].join(':'),
  });
