import { workflow as defineWorkflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const invoices = defineWorkflow('invoices', { version: 1, input: z.object({ invoiceId: z.string() }) })
  .transactional('issue', {
    output: z.object({ number: z.number() }),
    key: ({ input }) => `issue:${input.invoiceId}`,
  });

export { invoices as invoiceWorkflow };
