import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { createHash } from 'node:crypto';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => createHash('sha256').update(`${input.orderId}:${input.amountCents}`).digest('hex'),
  });
