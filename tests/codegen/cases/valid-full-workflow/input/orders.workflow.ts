import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }) })
  .step('price', { output: z.object({ amountCents: z.number(), currency: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    request: ({ input, steps }) => ({ amountCents: steps.price.amountCents, email: input.email }),
    idempotentByKey: true,
    performTimeoutMs: 5_000,
  })
  .transactional('record', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input, steps }) => `payment:${input.orderId}:${steps.charge.chargeId}`,
    retry: { maxAttempts: 5 },
  })
  .external('receipt', {
    output: z.object({ messageId: z.string() }),
    key: ({ steps }) => `receipt:${steps.record.paymentId}`,
  });
