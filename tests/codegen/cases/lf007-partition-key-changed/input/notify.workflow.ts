import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { emailQueue, smsQueue, tenantRuns } from './queues.js';

const input = z.object({ tenantId: z.string(), email: z.string(), phone: z.string() });
const sent = z.object({ sent: z.boolean() });

export const notify = workflow('notify', {
  version: 1,
  input,
  queue: { queue: tenantRuns, partitionKey: ({ input }) => input.tenantId.toLowerCase() },
})
  .step('send', { output: sent, queue: { queue: emailQueue, partitionKey: ({ input }) => input.email.slice(input.email.indexOf('@')) } })
  .step('text', { output: sent, queue: { queue: smsQueue, partitionKey: ({ input }) => input.phone.slice(0, 3) } })
  .step('log', { output: sent, queue: { queue: smsQueue } });

export const digest = workflow('digest', { version: 1, input, queue: { queue: tenantRuns } }).step('collect', { output: sent });
