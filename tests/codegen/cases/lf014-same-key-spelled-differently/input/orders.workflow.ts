import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { SEPARATOR, SHIP } from './prefixes.js';

const RESERVE = 'reserve';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), line: z.number() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => 'charge:' + input.orderId,
    idempotentByKey: true,
    compensate: { name: 'refund', output: z.object({ refundId: z.string() }), key: ({ input }) => `charge:${input.orderId}`, idempotentByKey: true },
  })
  .external('hold', {
    output: z.object({ holdId: z.string() }),
    key: ({ input }) => `hold:${input.orderId}`,
    idempotentByKey: true,
    compensate: { name: 'release', output: z.object({ released: z.boolean() }), key: ({ input }) => ['hold', input.orderId].join(':'), idempotentByKey: true },
  })
  .transactional('reserve', {
    output: z.object({ reservationId: z.string() }),
    key: ({ input }) => `reserve:${input.orderId}`,
    compensate: { name: 'unreserve', output: z.object({ done: z.boolean() }), key: ({ input }) => `${RESERVE}:${input.orderId}` },
  })
  .external('ship', {
    output: z.object({ shipmentId: z.string() }),
    key: (ctx) => `ship:${ctx.input.orderId}`,
    idempotentByKey: true,
    compensate: { name: 'recall', output: z.object({ recalled: z.boolean() }), key: ({ input: { orderId } }) => SHIP + SEPARATOR + orderId, idempotentByKey: true },
  })
  .transactional('allocate', {
    output: z.object({ allocationId: z.string() }),
    key: ({ input }) => `allocate:${input.orderId}:${input.line}`,
    compensate: {
      name: 'deallocate',
      output: z.object({ done: z.boolean() }),
      key: ({ input }) => {
        return 'allocate:' + String(input.orderId) + ':' + input['line'];
      },
    },
  });
