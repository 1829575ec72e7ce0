import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { copyBatch } from './copy-batch.workflow.js';

function batchCount(rows: number): number {
  return Math.ceil(rows / Number(process.env['BATCH_SIZE'] ?? 100));
}

export const backfill = workflow('backfill', { version: 1, input: z.object({ jobId: z.string(), rows: z.number() }) })
  .forEach('copy', {
    items: ({ input }) => Array.from({ length: batchCount(input.rows) }, (_, i) => i * 100),
    key: ({ input, item }) => `copy:${input.jobId}:${item}`,
    workflow: copyBatch,
    input: ({ item }) => ({ from: item }),
  });
