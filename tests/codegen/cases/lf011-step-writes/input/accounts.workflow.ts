import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const accounts = workflow('accounts', { version: 2, input: z.object({ accountId: z.string() }) })
  .step('load', { output: z.object({ balanceCents: z.number() }) })
  .step('touch', { output: z.object({}) })
  .step('cleanup', { output: z.object({}) })
  .step('snapshot', { output: z.object({ balanceCents: z.number() }) });
