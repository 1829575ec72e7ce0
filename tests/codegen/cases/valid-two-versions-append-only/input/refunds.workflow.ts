import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const refunds = workflow('refunds', { version: 1, input: z.object({ refundId: z.string() }) })
  .transactional('record', {
    output: z.object({ id: z.string() }),
    key: ({ input }) => `refund:${input.refundId}`,
  });
