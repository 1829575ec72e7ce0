import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', {
  version: 1,
  input: z.object({ orderId: z.string(), amountCents: z.number(), email: z.string() }),
})
  .step('price', { output: z.object({ amountCents: z.number() }) })
  .step('loadCustomer', { output: z.object({ name: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
  })
  .transactional('record', { output: z.object({ paymentId: z.string() }), key: ({ input }) => `record:${input.orderId}` })
  .transactional('count', { output: z.object({}), key: ({ input }) => `count:${input.orderId}` })
  .transactional('adjust', { output: z.object({}), key: ({ input }) => `adjust:${input.orderId}` })
  .transactional('audit', { output: z.object({}), key: ({ input }) => `audit:${input.orderId}` })
  .external('receipt', { output: z.object({ messageId: z.string() }), key: ({ input }) => `receipt:${input.orderId}` })
  .external('notify', {
    output: z.object({ ok: z.boolean() }),
    key: ({ input }) => `notify:${input.orderId}`,
    idempotentByKey: true,
  });
