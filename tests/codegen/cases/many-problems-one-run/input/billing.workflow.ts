import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

let counter = 0;

export const billing = workflow('billing', { version: 1, input: z.object({ invoiceId: z.string() }) })
  .transactional('issue', {
    output: z.object({ number: z.number() }),
  })
  .external('send', {
    output: z.object({ messageId: z.string() }),
    key: ({ input }) => `${input.invoiceId}:${counter}:${Date.now()}`,
  });
