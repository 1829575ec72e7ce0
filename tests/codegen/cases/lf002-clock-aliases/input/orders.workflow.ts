import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
const now = Date.now;
const { now: tick } = Date;
const clock = { now: () => Date.now() } as const;
const nowBound = Date.now.bind(Date);

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('s1', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${now()}` })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => { const { now: time } = Date; return `${input.orderId}:${time()}`; } })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${tick()}` })
  .external('s4', { output: z.object({ id: z.string() }), key: ({ input }) => { const D = Date; return `${input.orderId}:${D.now()}`; } })
  .external('s5', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${Date()}` })
  .external('s6', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date().getUTCDate()}` })
  .external('s7', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${process.hrtime.bigint()}` })
  .external('s8', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${process.uptime()}` })
  .external('s9', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${Math.floor(performance.now())}` })
  .external('s10', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${clock.now()}` })
  .external('s11', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${nowBound()}` })
  .external('s12', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${Date.now.call(Date)}` });
