import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { readFileSync } from 'node:fs';
import os from 'node:os';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('s1', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${process.argv[2]}` })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${os.hostname()}` })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${console.log(input.orderId)}` })
  .external('s4', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${readFileSync('/etc/hostname', 'utf8')}` })
  .external('s5', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${import.meta.url}` })
  .external('s6', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${String(fetch)}` });
