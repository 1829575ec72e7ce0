import { sharedQueue } from '@acme/queues';
import { queue, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { notAQueue } from './queues.js';

const localQueue = queue('local', { concurrency: 1 });

export const orders = workflow('orders', {
  version: 1,
  input: z.object({ orderId: z.string() }),
  queue: { queue: sharedQueue },
})
  .step('inline', { output: z.object({ ok: z.boolean() }), queue: { queue: queue('inline') } })
  .step('local', { output: z.object({ ok: z.boolean() }), queue: { queue: localQueue } })
  .step('fake', { output: z.object({ ok: z.boolean() }), queue: { queue: notAQueue } });
