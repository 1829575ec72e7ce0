import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

function even(n: number): string {
  return n <= 0 ? `${Date.now()}` : odd(n - 1);
}

function odd(n: number): string {
  return n <= 0 ? 'odd' : even(n - 1);
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), depth: z.number() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `${input.orderId}:${even(input.depth)}`,
  })
  .external('refund', {
    output: z.object({ refundId: z.string() }),
    key: ({ input }) => `${input.orderId}:${odd(input.depth)}`,
  });
