import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const ordersV2 = workflow('orders', {
  version: 2,
  input: z.object({ orderId: z.string(), amountCents: z.number().int() }),
})
  .step('load', { output: z.object({ customerId: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    request: ({ input }) => ({ amountCents: input.amountCents }),
    idempotentByKey: true,
  })
  .step('notify', { output: z.object({ notified: z.boolean() }) })
  .transactional('record', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input, steps }) => `record:${input.orderId}:${steps.charge.chargeId}`,
  });
