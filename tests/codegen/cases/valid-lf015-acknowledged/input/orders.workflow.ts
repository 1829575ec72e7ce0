import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), email: z.string() }) })
  .step('price', { output: z.object({ amountCents: z.number() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: {
      name: 'refund',
      output: z.object({ refundId: z.string() }),
      key: ({ input }) => `refund:${input.orderId}`,
      idempotentByKey: true,
    },
  })
  // ledgerflow-ignore LF015: the payment record is our books; a refunded charge is booked by the refund itself, never deleted
  .transactional('record', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input }) => `record:${input.orderId}`,
  })
  .external('notify', {
    output: z.object({ messageId: z.string() }),
    key: ({ input }) => `notify:${input.email}:${input.orderId}`,
  });

export const plain = workflow('plain', { version: 1, input: z.object({ orderId: z.string() }) }).transactional('record', {
  output: z.object({ paymentId: z.string() }),
  key: ({ input }) => `record:${input.orderId}`,
});
