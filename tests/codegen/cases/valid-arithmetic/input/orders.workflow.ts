import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .transactional('bucket', {
    output: z.object({ bucket: z.number() }),
    key: ({ input }) => `bucket:${Math.floor(input.amountCents / 1000) * 1000 + Math.max(0, Math.round(input.amountCents % 7))}`,
  });
