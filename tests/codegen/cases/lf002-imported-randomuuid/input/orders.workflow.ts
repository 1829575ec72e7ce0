import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { randomUUID } from 'node:crypto';
import * as nodeCrypto from 'node:crypto';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `${input.orderId}:${randomUUID()}`,
  })
  .external('refund', {
    output: z.object({ refundId: z.string() }),
    key: ({ input }) => `${input.orderId}:${nodeCrypto.randomBytes(8).toString('hex')}`,
  });
