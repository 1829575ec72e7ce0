import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('charge', { output: z.object({ id: z.string() }), key: ({ input }) => `charge:${input.orderId}`, request: ({ input, steps }) => ({ orderId: input.orderId, receipt: steps.receipt.id }) })
  .external('receipt', { output: z.object({ id: z.string() }), key: ({ input }) => `receipt:${input.orderId}` });
