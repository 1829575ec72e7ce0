import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const reminders = workflow('reminders', { version: 1, input: z.object({ userId: z.string() }) })
  .sleep('aDayLater', { until: () => new Date(Date.now() + 86_400_000) })
  .step('remind', { output: z.object({ sent: z.boolean() }) });
