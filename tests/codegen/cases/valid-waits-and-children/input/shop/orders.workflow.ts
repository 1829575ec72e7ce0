import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { copyBatch } from './copy-batch.workflow.js';
import * as events from './events.js';
import { paymentSettled } from './events.js';
import { shipment } from './shipment.workflow.js';

const DAY_MS = 86_400_000;

function batchesOf(count: number): { from: number; to: number }[] {
  return Array.from({ length: count }, (_, i) => ({ from: i * 100, to: i * 100 + 99 }));
}

export const orders = workflow('orders', {
  version: 1,
  input: z.object({ orderId: z.string(), express: z.boolean(), rows: z.number().int(), remindAt: z.string() }),
  timeoutMs: 7 * DAY_MS,
})
  .step('plan', { output: z.object({ batchCount: z.number() }) })
  .step('quote', {
    output: z.object({ feeCents: z.number() }),
    when: ({ input }) => input.express,
  })
  .transactional('reserve', {
    output: z.object({ reservationId: z.string() }),
    key: ({ input }) => `reserve:${input.orderId}`,
    when: ({ steps }) => steps.quote !== undefined && steps.quote.feeCents > 0,
  })
  .sleep('coolOff', { for: ({ input }) => (input.express ? 0 : 60_000) })
  .sleep('untilReminder', { until: ({ input }) => input.remindAt, when: ({ input }) => !input.express })
  .waitFor('settled', { event: paymentSettled, match: ({ input }) => input.orderId, timeoutMs: DAY_MS })
  .waitFor('approved', { event: events.approvalGiven })
  .child('ship', shipment, {
    key: ({ input }) => `ship:${input.orderId}`,
    input: ({ input }) => ({ orderId: input.orderId }),
    when: ({ steps }) => steps.settled.status === 'received',
  })
  .forEach('copy', {
    items: ({ steps }) => batchesOf(steps.plan.batchCount),
    key: ({ input, item }) => `copy:${input.orderId}:${item.from}`,
    workflow: copyBatch,
    input: ({ input, item }) => ({ jobId: input.orderId, from: item.from, to: item.to }),
    concurrency: 4,
  })
  .step('summarize', { output: z.object({ copied: z.number() }) });
