import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const ledger = workflow('ledger', { version: 3, input: z.object({ entryId: z.string() }) })
  .transactional('post', { output: z.object({}), key: ({ input }) => `post:${input.entryId}` })
  .transactional('mirror', { output: z.object({}), key: ({ input }) => `mirror:${input.entryId}` })
  .transactional('close', { output: z.object({}), key: ({ input }) => `close:${input.entryId}` });
