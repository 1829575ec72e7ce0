import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const batch = workflow('batch', { version: 1, input: z.object({ from: z.number(), to: z.number() }) }).step('run', {
  output: z.object({ done: z.boolean() }),
});

export const batches = workflow('batches', {
  version: 1,
  input: z.object({ jobId: z.string(), ranges: z.array(z.object({ from: z.number(), to: z.number() })) }),
})
  .step('plan', { output: z.object({ batches: z.array(z.object({ from: z.number(), to: z.number() })) }) })
  .forEach('fromInput', {
    items: ({ input }) => input.ranges,
    key: ({ input, item }) => `${input.jobId}:${item}`,
    workflow: batch,
    input: ({ item }) => ({ from: item.from, to: item.to }),
  })
  .forEach('fromPlan', {
    items: ({ steps }) => steps.plan.batches.filter((b) => b.to > b.from),
    key: ({ item, index }) => String(item) + ':' + index,
    workflow: batch,
    input: ({ item }) => item,
  });
