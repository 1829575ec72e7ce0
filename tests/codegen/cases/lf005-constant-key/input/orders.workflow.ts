import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .transactional('recordDigest', {
    output: z.object({ digestId: z.string() }),
    key: () => 'daily-digest',
  });
