import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import * as queues from './queues.js';
import { emailQueue, keys, tenantRuns } from './queues.js';

const emailUse = { queue: emailQueue };

export const tenants = workflow('tenants', {
  version: 1,
  input: z.object({ tenantId: z.string() }),
  queue: { queue: tenantRuns, partitionKey: ({ input }) => input.tenantId },
})
  .step('direct', { output: z.object({ ok: z.boolean() }), queue: emailQueue })
  .step('nameless', { output: z.object({ ok: z.boolean() }), queue: { partitionKey: ({ input }) => input.tenantId } })
  .step('spread', { output: z.object({ ok: z.boolean() }), queue: { ...emailUse } })
  .step('keyed', { output: z.object({ ok: z.boolean() }), queue: { queue: queues.emailQueue, partitionKey: keys.byTenant } })
  .step('again', { output: z.object({ ok: z.boolean() }), queue: { queue: queues.tenantRuns } });
