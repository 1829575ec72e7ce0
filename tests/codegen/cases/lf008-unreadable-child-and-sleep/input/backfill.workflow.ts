import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { copyBatch } from './lib/copy-batch.js';

const children = { copyBatch };

export const backfill = workflow('backfill', { version: 1, input: z.object({ jobId: z.string(), starts: z.array(z.number()) }) })
  .child('first', copyBatch, {
    key: ({ input }) => `first:${input.jobId}`,
    input: () => ({ from: 0 }),
  });

export const refill = workflow('refill', { version: 1, input: z.object({ jobId: z.string(), starts: z.array(z.number()) }) })
  .forEach('rest', {
    items: ({ input }) => input.starts,
    key: ({ input, item }) => `rest:${input.jobId}:${item}`,
    workflow: children.copyBatch,
    input: ({ item }) => ({ from: item }),
  });

export const nap = workflow('nap', { version: 1, input: z.object({ jobId: z.string() }) })
  .sleep('rest', { when: () => true });
