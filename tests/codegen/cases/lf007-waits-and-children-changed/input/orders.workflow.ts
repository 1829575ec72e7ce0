import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { copyBatchV2 } from './copy-batch.workflow.js';
import { paymentSettled } from './events.js';

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), starts: z.array(z.number()) }) })
  .step('load', { output: z.object({ total: z.number() }), when: ({ input }) => input.starts.length > 0 })
  .waitFor('settled', { event: paymentSettled, match: ({ input }) => input.orderId, timeoutMs: 3_600_000 })
  .forEach('copy', {
    items: ({ input }) => input.starts,
    key: ({ input, item }) => `copy:${input.orderId}:${item}`,
    workflow: copyBatchV2,
    input: ({ item }) => ({ from: item }),
    concurrency: 8,
  });
