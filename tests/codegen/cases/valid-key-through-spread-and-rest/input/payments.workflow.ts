import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const payments = workflow('payments', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ ...ctx }) => `charge:${ctx.input.orderId}`,
    idempotentByKey: true,
  })
  .external('capture', {
    output: z.object({ captureId: z.string() }),
    key: (...args) => `capture:${args[0].input.orderId}`,
    idempotentByKey: true,
  })
  .external('receipt', {
    output: z.object({ receiptId: z.string() }),
    key: (...[ctx]) => `receipt:${ctx.input.orderId}:${ctx.steps.charge.chargeId}`,
    idempotentByKey: true,
  })
  .external('notify', {
    output: z.object({ messageId: z.string() }),
    key: ({ input: { ...order } }) => `notify:${order.orderId}`,
    idempotentByKey: true,
  });
