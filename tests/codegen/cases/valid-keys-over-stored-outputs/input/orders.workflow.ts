import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .step('load', { output: z.object({ total: z.number(), lines: z.record(z.string(), z.number()) }) })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ steps }) => `a:${JSON.stringify(steps.load)}` })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input, steps }) => `${input.orderId}:${Object.values(steps.load.lines).join(',')}` })
  .external('s4', { output: z.object({ id: z.string() }), key: ({ input, steps }) => `${input.orderId}:${Object.keys(steps).join(',')}` })
  .external('s5', { output: z.object({ id: z.string() }), key: ({ input, steps }) => {
    const parts: string[] = [];
    for (const name in steps.load.lines) parts.push(name);
    return `${input.orderId}:${parts.join(',')}`;
  } })
  .external('s6', { output: z.object({ id: z.string() }), key: ({ input, steps }) => `${input.orderId}:${Object.entries(steps.load).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join('&')}` })
  .external('s7', { output: z.object({ id: z.string() }), key: ({ steps }) => `f:${JSON.stringify(steps)}` });
