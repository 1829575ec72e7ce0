import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), tier: z.string() }) })
  .step('load', { output: z.object({ total: z.number() }) })
  .transactional('vip', {
    output: z.object({ perkId: z.string() }),
    key: ({ input }) => `vip:${input.orderId}`,
    when: ({ input }) => input.tier !== 'basic',
  });
