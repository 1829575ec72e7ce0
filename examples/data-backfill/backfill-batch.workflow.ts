import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

/**
 * Copies one id range `[fromId, toId)` of `legacy.account` into `billing.account`: one run per
 * batch, started by the `data-backfill` workflow's fan-out (one child per range, keyed
 * `<job>:<fromId>`), or on its own.
 *
 * Each run has a single `transactional` step whose key is the range. The copy, the progress
 * counter, the ledger row and the run's completion commit together: a worker killed mid-batch
 * commits nothing and the batch is redone whole; a batch that committed is never applied
 * again, because its run is completed and its ledger row exists. Batches are independent, so
 * several workers may copy in parallel.
 */
export const backfillBatch = workflow('backfill-batch', {
  version: 1,
  input: z
    .object({
      job: z.string().min(1),
      fromId: z.number().int().nonnegative(),
      toId: z.number().int().positive(),
    })
    .refine((batch) => batch.toId > batch.fromId, { message: 'toId must be greater than fromId', path: ['toId'] }),
}).transactional('copyBatch', {
  output: z.object({ copied: z.number().int().nonnegative() }),
  key: ({ input }) => `copy:${input.job}:${input.fromId}-${input.toId}`,
});
