import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }), compensateOnCancel: true })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: {
      name: 'refund',
      output: z.object({ refundId: z.string() }),
      key: ({ input }) => `refund:${input.orderId}:full`,
      idempotentByKey: true,
    },
  })
  .transactional('record', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input }) => `record:${input.orderId}`,
    compensate: { name: 'unrecord', output: z.object({ deleted: z.boolean() }), key: ({ input }) => `unrecord:${input.orderId}` },
  });
