import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('s1', { output: z.object({ id: z.string() }), key: ({ input }) => `s1:${input.orderId}`, request: ({ input }) => ({ orderId: input.orderId, at: Date.now() }) })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => `s2:${input.orderId}`, request: ({ input }) => ({ orderId: input.orderId, nonce: Math.random() }) })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input }) => `s3:${input.orderId}`, request: ({ input }) => ({ orderId: input.orderId, region: process.env['REGION'] }) })
  .external('s4', { output: z.object({ id: z.string() }), key: ({ input }) => `s4:${input.orderId}`, request: ({ input }) => ({ orderId: input.orderId, id: crypto.randomUUID() }) })
  .transactional('s5', { output: z.object({ id: z.string() }), key: ({ input }) => `s5:${input.orderId}`, request: ({ input }) => ({ orderId: input.orderId, day: new Date().toISOString() }) });

export const refunds = workflow('refunds', { version: 1, input: z.object({ orderId: z.string() }) })
  .external('s6', {
    output: z.object({ id: z.string() }),
    key: ({ input }) => `s6:${input.orderId}`,
    compensate: { name: 'undo', output: z.object({ ok: z.boolean() }), key: ({ input }) => `undo:${input.orderId}`, request: ({ input }) => ({ orderId: input.orderId, at: performance.now() }) },
  });
