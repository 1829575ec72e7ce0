import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
function requestOf({ input }: { input: { orderId: string; items: readonly { sku: string; n: number }[] } }) {
  return { orderId: input.orderId, skus: input.items.map((i) => i.sku).toSorted() };
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .step('load', { output: z.object({ total: z.number() }) })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => `s2:${input.orderId}`, request: ({ input, steps }) => ({ orderId: input.orderId, total: steps.load.total, tags: [...input.tags].sort() }) })
  .transactional('s3', { output: z.object({ id: z.string() }), key: ({ input }) => `s3:${input.orderId}`, request: ({ input }) => ({ day: new Date(input.at).toISOString().slice(0, 10), amount: input.amountCents.toFixed(2) }) });

export const refunds = workflow('refunds', { version: 1, input: z.object({ orderId: z.string(), items: z.array(z.object({ sku: z.string(), n: z.number() })) }) })
  .external('s4', {
    output: z.object({ id: z.string() }),
    key: ({ input }) => `s4:${input.orderId}`,
    request: requestOf,
    compensate: { name: 'undo', output: z.object({ ok: z.boolean() }), key: ({ input, steps }) => `undo:${input.orderId}:${steps.s4.id}`, request: ({ steps }) => ({ id: steps.s4.id }) },
  });
