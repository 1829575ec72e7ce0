import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const copyBatch = workflow('copy-batch', { version: 1, input: z.object({ from: z.number() }) })
  .step('copy', { output: z.object({ copied: z.number() }) });

export const copyBatchV2 = workflow('copy-batch', { version: 2, input: z.object({ from: z.number() }) })
  .step('copy', { output: z.object({ copied: z.number(), skipped: z.number() }) });
