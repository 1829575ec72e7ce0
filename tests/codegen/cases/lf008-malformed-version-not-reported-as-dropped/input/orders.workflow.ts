import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', {
  version: 1,
  input: z.object({ orderId: z.string(), amountCents: z.number().int() }),
})
  .step('load', { output: z.object({ customerId: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: `charge`,
    request: ({ input }) => ({ amountCents: input.amountCents }),
    idempotentByKey: true,
  })
  .transactional('record', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input, steps }) => `record:${input.orderId}:${steps.charge.chargeId}`,
  });
