import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    // @ts-expect-error -- a key runs before its step
    key: (ctx) => `charge:${ctx.steps.charge.chargeId}`,
  });
