import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { copyBatch } from './copy-batch.workflow.js';

export const backfill = workflow('backfill', { version: 1, input: z.object({ jobId: z.string(), starts: z.array(z.number()) }) })
  .forEach('copy', {
    items: ({ input }) => input.starts,
    key: ({ input, index }) => `copy:${input.jobId}:${index}`,
    workflow: copyBatch,
    input: ({ item }) => ({ from: item }),
  })
  .forEach('verify', {
    items: ({ input }) => input.starts,
    key: ({ input, item }) => `verify:${input.jobId}:${item}`,
    workflow: copyBatch,
    input: ({ item }) => ({ from: item }),
  });
