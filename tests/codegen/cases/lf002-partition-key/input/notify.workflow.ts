import { queue, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const emailQueue = queue('email', { rateLimit: { limit: 10, periodMs: 1_000 } });
export const tenantRuns = queue('tenant-runs', { partition: { concurrency: 1 } });

export const notify = workflow('notify', {
  version: 1,
  input: z.object({ tenantId: z.string(), email: z.string() }),
  queue: { queue: tenantRuns, partitionKey: () => `shard-${Math.floor(Math.random() * 8)}` },
}).step('send', {
  output: z.object({ sent: z.boolean() }),
  queue: { queue: emailQueue, partitionKey: ({ input }) => `${input.email}:${Math.floor(Date.now() / 3_600_000)}` },
});
