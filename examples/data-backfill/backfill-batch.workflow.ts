import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

/**
 * Copies one id range of `legacy.account` into `billing.account`: one run per batch.
 *
 * Why one run per batch rather than one run for the whole table: a workflow's steps are a
 * fixed list declared up front, while the number of batches depends on the data. So the
 * *driver* (`enqueue-backfill.ts`) cuts the id space into ranges and starts one run per range,
 * with the dedupe key `batch:<table>:<fromId>`; starting is idempotent, so re-running the
 * driver after it was killed half-way starts only the batches that are missing.
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
