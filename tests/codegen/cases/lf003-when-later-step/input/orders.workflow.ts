import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .step('quote', {
    output: z.object({ feeCents: z.number() }),
    when: ({ steps }) => steps.load.total > 100,
  })
  .step('load', { output: z.object({ total: z.number() }) })
  .sleep('pause', { for: ({ steps }) => (steps.pause === undefined ? 1_000 : 0) });
