import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const Customer = z.object({ id: z.string(), email: z.string() });

export const orders = workflow('orders', {
  version: 1,
  input: z.object({ orderId: z.string(), customer: Customer, lines: z.array(z.object({ sku: z.string(), qty: z.number() })) }),
})
  .step('priceOrder', { output: z.object({ totalCents: z.number(), currency: z.enum(['eur', 'usd']) }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input}`,
    idempotentByKey: true,
  })
  .external('invoice', {
    output: z.object({ invoiceId: z.string() }),
    key: ({ input, steps }) => `invoice:${input.orderId}:${steps.priceOrder}`,
    idempotentByKey: true,
  })
  .transactional('remember', {
    output: z.object({ ok: z.boolean() }),
    key: ({ input }) => `remember:${input.customer}:${input.lines}`,
  })
  .external('notify', {
    output: z.object({ messageId: z.string() }),
    key: (ctx) => `notify:${ctx}`,
    idempotentByKey: true,
  });
