import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .transactional('reserve', {
    output: z.object({ reservationId: z.string() }),
    key: ({ input }) => `reserve:${input.orderId}`,
    compensate: { name: 'release', output: z.object({ released: z.boolean() }), key: ({ input }) => `release:${input.orderId}` },
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: {
      name: 'reserve',
      output: z.object({ refundId: z.string() }),
      key: ({ input }) => `refund:${input.orderId}`,
      idempotentByKey: true,
    },
  })
  .transactional('release', {
    output: z.object({ done: z.boolean() }),
    key: ({ input }) => `done:${input.orderId}`,
    compensate: { name: 'undoRelease', output: z.object({ undone: z.boolean() }), key: ({ input }) => `undo:${input.orderId}` },
  });
