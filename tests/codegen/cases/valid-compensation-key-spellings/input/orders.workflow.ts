import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const REFUND = 'refund';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), customerId: z.string(), a: z.number(), b: z.number() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: { name: 'refund', output: z.object({ refundId: z.string() }), key: ({ input }) => `refund:${input.orderId}`, idempotentByKey: true },
  })
  .external('hold', {
    output: z.object({ holdId: z.string() }),
    key: ({ input }) => 'hold:' + input.orderId,
    idempotentByKey: true,
    compensate: { name: 'release', output: z.object({ released: z.boolean() }), key: ({ input }) => [REFUND, input.orderId].join(':'), idempotentByKey: true },
  })
  .transactional('reserve', {
    output: z.object({ reservationId: z.string() }),
    key: ({ input }) => `reserve:${input.orderId}`,
    compensate: { name: 'unreserve', output: z.object({ done: z.boolean() }), key: ({ input: { customerId } }) => `reserve:${customerId}` },
  })
  .transactional('sum', {
    output: z.object({ total: z.number() }),
    key: ({ input }) => `sum:${input.a + input.b}`,
    compensate: { name: 'unsum', output: z.object({ done: z.boolean() }), key: ({ input }) => `sum:${input.b + input.a}` },
  });
