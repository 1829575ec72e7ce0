import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const refund = workflow('refund', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number() }) })
  .step('findCharge', { output: z.object({ chargeId: z.string() }) })
  .step('preview', { output: z.object({ refundId: z.string() }) })
  .step('rates', { output: z.object({ rate: z.number() }) })
  .external('refundCharge', {
    output: z.object({ refundId: z.string() }),
    key: ({ input }) => `refund:${input.orderId}`,
    idempotentByKey: true,
  });
