import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('s1', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(input.at).getHours()}` })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(input.at).getDate()}` })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(input.at).getFullYear()}` })
  .external('s4', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(input.at).toString()}` })
  .external('s5', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(input.at)}` })
  .external('s6', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${String(new Date(input.at))}` })
  .external('s7', { output: z.object({ id: z.string() }), key: ({ input }) => { const day = new Date(input.at); return `${input.orderId}:${day}`; } })
  .external('s8', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(input.at).toDateString()}` })
  .external('s9', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(input.at).toLocaleDateString('en-US')}` })
  .external('s10', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(input.at).toLocaleString()}` })
  .external('s11', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Intl.DateTimeFormat().format(new Date(input.at))}` })
  .external('s12', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${Intl.DateTimeFormat('en-US').format(new Date(input.at))}` })
  .external('s13', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Intl.NumberFormat().format(input.amountCents)}` })
  .external('s14', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${Intl.DateTimeFormat().resolvedOptions().timeZone}` })
  .external('s15', { output: z.object({ id: z.string() }), key: ({ input }) => input.tags.toSorted((a, b) => a.localeCompare(b)).join() })
  .external('s16', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId.toLocaleUpperCase()}` })
  .external('s17', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(2024, 0, 1).toISOString()}` })
  .external('s18', { output: z.object({ id: z.string() }), key: ({ input }) => { const d = new Date(input.at); d.setHours(0, 0, 0, 0); return `${input.orderId}:${d.toISOString()}`; } })
  .external('s19', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${new Date(input.at).getTimezoneOffset()}` })
  .external('s20', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${Date.prototype.getHours.call(new Date(input.at))}` });
