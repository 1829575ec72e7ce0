import { queue, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const emailQueue = queue('email', { concurrency: 5 });

export const notify = workflow('notify', { version: 1, input: z.object({ email: z.string() }) })
  .step('send', {
    output: z.object({ provider: z.string() }),
    queue: { queue: emailQueue, partitionKey: ({ steps }) => `${steps.send.provider}:${steps.audit.region}` },
  })
  .step('audit', { output: z.object({ region: z.string() }) });
