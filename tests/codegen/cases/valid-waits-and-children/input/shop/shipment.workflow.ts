import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const shipment = workflow('shipment', { version: 2, input: z.object({ orderId: z.string() }) })
  .external('book', {
    output: z.object({ trackingId: z.string() }),
    key: ({ input }) => `ship:${input.orderId}`,
    idempotentByKey: true,
  });
