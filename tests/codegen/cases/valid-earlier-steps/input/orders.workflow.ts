import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .step('load', { output: z.object({ customerId: z.string(), tags: z.array(z.string()) }) })
  .transactional('reserve', {
    output: z.object({ reservationId: z.string() }),
    key: ({ steps: { load } }) => `reserve:${load.customerId}:${load.tags.toSorted().join(',')}`,
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: (ctx) => {
      const { reserve } = ctx.steps;
      return `charge:${reserve.reservationId}:${JSON.stringify(ctx.input)}`;
    },
  });
