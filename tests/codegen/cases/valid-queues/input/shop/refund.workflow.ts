import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const refund = workflow('refund', { version: 1, input: z.object({ refundId: z.string() }) })
  .transactional('record', {
    output: z.object({ recorded: z.boolean() }),
    key: ({ input }) => `refund:${input.refundId}`,
  });
