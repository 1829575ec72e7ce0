import { queue, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import * as queues from './queues.js';
import { tenantRuns } from './queues.js';

export const ledgerWrites = queue('ledger-writes', { concurrency: 4 });

function domainOf(email: string): string {
  return email.slice(email.indexOf('@') + 1).toLowerCase();
}

export const onboarding = workflow('onboarding', {
  version: 1,
  input: z.object({ tenantId: z.string(), userId: z.string(), email: z.string() }),
  queue: { queue: tenantRuns, partitionKey: ({ input }) => input.tenantId },
})
  .step('profile', { output: z.object({ locale: z.string() }) })
  .transactional('account', {
    output: z.object({ accountId: z.string() }),
    key: ({ input }) => `account:${input.userId}`,
    queue: { queue: ledgerWrites },
  })
  .external('welcome', {
    output: z.object({ messageId: z.string() }),
    key: ({ input }) => `welcome:${input.userId}`,
    idempotentByKey: true,
    queue: { queue: queues.emailQueue, partitionKey: ({ input }) => domainOf(input.email) },
  })
  .step('digest', {
    output: z.object({ sent: z.boolean() }),
    queue: { queue: queues.emailQueue, partitionKey: ({ steps }) => `locale:${steps.profile.locale}` },
  });
