import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { copyBatch } from './copy-batch.workflow.js';

export const backfill = workflow('backfill', { version: 1, input: z.object({ jobId: z.string(), starts: z.array(z.number()) }) })
  .child('first', copyBatch, {
    input: ({ input }) => ({ from: input.starts[0] ?? 0 }),
  })
  .forEach('rest', {
    items: ({ input }) => input.starts.slice(1),
    workflow: copyBatch,
    input: ({ item }) => ({ from: item }),
  });
