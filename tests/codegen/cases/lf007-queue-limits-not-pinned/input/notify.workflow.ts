import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { emailQueue, tenantRuns } from './queues.js';

const input = z.object({ tenantId: z.string(), email: z.string() });
const sent = z.object({ sent: z.boolean() });

export const receipt = workflow('receipt', { version: 1, input, queue: { queue: tenantRuns, partitionKey: ({ input }) => input.tenantId } })
  .step('send', { output: sent, queue: { queue: emailQueue, partitionKey: ({ input }) => input.email } });

export const alert = workflow('alert', { version: 1, input })
  .step('send', { output: sent, queue: { queue: emailQueue, partitionKey: ({ input }) => input.tenantId.toLowerCase() } });
