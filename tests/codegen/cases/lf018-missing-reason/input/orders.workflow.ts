import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .external('sendDigest', {
    output: z.object({ messageId: z.string() }),
    // ledgerflow-ignore LF005
    key: () => 'daily-digest',
  })
  .external('sendSummary', {
    output: z.object({ messageId: z.string() }),
    // ledgerflow-ignore LF005:
    key: () => 'daily-summary',
  })
  .external('sendReport', {
    output: z.object({ messageId: z.string() }),
    // ledgerflow-ignore
    key: () => 'daily-report',
  });
