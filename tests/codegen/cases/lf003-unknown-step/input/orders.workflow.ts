import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .step('load', { output: z.object({ customerId: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    // @ts-expect-error -- typo
    key: ({ steps }) => `charge:${steps.laod.customerId}`,
  });
