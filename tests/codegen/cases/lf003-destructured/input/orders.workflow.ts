import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .step('load', { output: z.object({ customerId: z.string() }) })
  .transactional('reserve', {
    output: z.object({ reservationId: z.string() }),
    // @ts-expect-error -- charge comes later
    key: ({ steps: { load, charge } }) => `reserve:${load.customerId}:${charge.chargeId}`,
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
  });
