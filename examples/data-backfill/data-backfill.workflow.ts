import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { backfillBatch } from './backfill-batch.workflow.js';

/**
 * Copies all of `legacy.account` into `billing.account`, one child run of `backfill-batch` per
 * id range. Start it once per job, with the job as dedupe key.
 *
 * - `planBatches` reads the id range (through the read-only `ctx.db`) and cuts it into ranges
 *   aligned to multiples of `batchSize`. Its output is checkpointed: the plan is made once, and
 *   every later attempt of the fan-out sees the same list.
 * - `copyBatches` starts one `backfill-batch` run per range, each once by its key
 *   (`<job>:<fromId>`), at most 4 unfinished at a time, and waits for all of them — as a
 *   `waiting` run, holding no worker slot. A worker killed anywhere starts no batch twice, and a
 *   batch that committed is never copied again. If a batch fails, the step fails and the run
 *   with it.
 * - `total` adds up the children's outputs, which arrive in range order.
 */
export const dataBackfill = workflow('data-backfill', {
  version: 1,
  input: z.object({
    job: z.string().min(1),
    batchSize: z.number().int().positive().max(100_000),
  }),
})
  .step('planBatches', {
    output: z.object({
      batches: z.array(z.object({ fromId: z.number().int().nonnegative(), toId: z.number().int().positive() })),
    }),
  })
  .forEach('copyBatches', {
    items: ({ steps }) => steps.planBatches.batches,
    key: ({ input, item }) => `${input.job}:${item.fromId}`,
    workflow: backfillBatch,
    input: ({ input, item }) => ({ job: input.job, fromId: item.fromId, toId: item.toId }),
    concurrency: 4,
  })
  .step('total', {
    output: z.object({ batches: z.number().int().nonnegative(), rowsCopied: z.number().int().nonnegative() }),
  });
