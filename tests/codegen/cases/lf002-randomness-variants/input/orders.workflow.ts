import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { randomBytes, randomInt } from 'node:crypto';

const { random: pick } = Math;

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('s1', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${pick()}` })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${crypto.getRandomValues(new Uint8Array(4)).join('')}` })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${randomBytes(4).toString('hex')}` })
  .external('s4', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${Buffer.allocUnsafe(8).toString('hex')}` })
  .external('s5', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${[...input.tags].sort(() => Math.random() - 0.5).join()}` })
  .external('s6', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${randomInt(10)}` });
