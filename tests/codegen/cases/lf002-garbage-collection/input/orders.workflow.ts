import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('s1', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new WeakRef(input.items).deref()?.length}` })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => { const seen = new WeakMap<object, string>(); seen.set(input.items, 'x'); return `${input.orderId}:${seen.get(input.items)}`; } })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input }) => { new FinalizationRegistry(() => undefined).register(input.items, 1); return input.orderId; } });
