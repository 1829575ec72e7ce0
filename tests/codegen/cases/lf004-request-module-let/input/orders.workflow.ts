import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
let attempt = 0;
const cache = new Map<string, number>();

function nextAttempt(): number {
  return attempt;
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('s1', { output: z.object({ id: z.string() }), key: ({ input }) => `s1:${input.orderId}`, request: ({ input }) => ({ orderId: input.orderId, attempt }) })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => `s2:${input.orderId}`, request: ({ input }) => ({ orderId: input.orderId, tries: nextAttempt() }) })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input }) => `s3:${input.orderId}`, request: ({ input }) => ({ orderId: input.orderId, seen: cache.get(input.orderId) }) });
