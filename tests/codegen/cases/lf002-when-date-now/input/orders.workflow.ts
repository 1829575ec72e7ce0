import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), deadline: z.number() }) })
  .step('load', { output: z.object({ total: z.number() }) })
  .transactional('remind', {
    output: z.object({ reminderId: z.string() }),
    key: ({ input }) => `remind:${input.orderId}`,
    when: ({ input }) => Date.now() > input.deadline,
  });
