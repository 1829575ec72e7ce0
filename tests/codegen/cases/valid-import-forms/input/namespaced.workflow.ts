import * as lf from 'ledgerflow/dsl';
import { z } from 'zod';

export const reminders = lf
  .workflow('reminders', { version: 4, input: z.object({ invoiceId: z.string(), round: z.number().int() }) })
  .external('remind', {
    output: z.object({ messageId: z.string() }),
    key: ({ input }) => `remind:${input.invoiceId}:${input.round}`,
  });
