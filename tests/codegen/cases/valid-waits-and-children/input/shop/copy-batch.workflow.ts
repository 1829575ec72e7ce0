import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const copyBatch = workflow('copy-batch', { version: 1, input: z.object({ jobId: z.string(), from: z.number(), to: z.number() }) })
  .transactional('copy', {
    output: z.object({ copied: z.number() }),
    key: ({ input }) => `copy:${input.jobId}:${input.from}`,
  });
