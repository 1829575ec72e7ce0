import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const report = workflow('report', { version: 1, input: z.object({ night: z.iso.date(), region: z.string() }) })
  .step('total', { output: z.object({ cents: z.number().int() }) });

