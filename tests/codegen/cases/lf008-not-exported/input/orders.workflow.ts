import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .step('load', { output: z.object({ customerId: z.string() }) });

export const refunds = orders.external('refund', {
  output: z.object({ refundId: z.string() }),
  key: ({ input }) => `refund:${input.orderId}`,
});
