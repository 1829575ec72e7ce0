import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { copyBatch } from './copy-batch.workflow.js';

let firstRow = 0;

export function startFrom(row: number): void {
  firstRow = row;
}

export const backfill = workflow('backfill', { version: 1, input: z.object({ jobId: z.string() }) })
  .child('first', copyBatch, {
    key: ({ input }) => `first:${input.jobId}`,
    input: () => ({ from: firstRow }),
  });
