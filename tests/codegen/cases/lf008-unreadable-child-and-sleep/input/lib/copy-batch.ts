import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const copyBatch = workflow('copy-batch', { version: 1, input: z.object({ from: z.number() }) })
  .step('copy', { output: z.object({ copied: z.number() }) });
