import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

/** Not a comment: a string that only looks like one is never read as a suppression. */
export const LOOKS_LIKE_ONE = '// ledgerflow-ignore LF001: not a comment';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
  })
  .external('sendDigest', {
    output: z.object({ messageId: z.string() }),
    // ledgerflow-ignore LF005: one digest a day for the whole shop, deduped by the provider on purpose
    key: () => 'daily-digest',
  })
  .transactional('audit', {
    output: z.object({ auditId: z.string() }),
    // ledgerflow-ignore LF005: the audit row is keyed by its run already | one per run
    key: () => 'audit',
  });
