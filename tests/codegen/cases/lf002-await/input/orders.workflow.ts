import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    // @ts-expect-error -- a key must return a string, not a promise; codegen says why
    key: async ({ input }) => `${input.orderId}:${await Promise.resolve(1)}`,
  });
