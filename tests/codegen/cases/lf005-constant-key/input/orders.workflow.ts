import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('sendDigest', {
    output: z.object({ messageId: z.string() }),
    key: () => 'daily-digest',
  });
