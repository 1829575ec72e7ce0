import { sql } from 'kysely';
import type { WorkflowRegistration } from 'ledgerflow/runtime';
import { backfillBatchHandlers } from '../../generated/contracts/backfill-batch.v1.js';
import { dataBackfillHandlers } from '../../generated/contracts/data-backfill.v1.js';
import type { AppDatabase } from '../migrations/app-database.js';
import type { backfillBatch } from './backfill-batch.workflow.js';
import type { dataBackfill } from './data-backfill.workflow.js';

/**
 * `data-backfill` bound to its handlers: the plan and the sum. `copyBatches` is a built-in
 * `forEach` step; the worker starts and awaits the children itself.
 */
export function dataBackfillRegistration(): WorkflowRegistration<typeof dataBackfill> {
  return dataBackfillHandlers<AppDatabase>({
    async planBatches({ db, input }) {
      const range = await db
        .selectFrom('legacy.account')
        .select((eb) => [eb.fn.min<number | null>('id').as('min'), eb.fn.max<number | null>('id').as('max')])
        .executeTakeFirstOrThrow();
      if (range.min === null || range.max === null) return { batches: [] };
      // Aligned to multiples of batchSize, so the same table and size always give the same ranges.
      const batches: Array<{ fromId: number; toId: number }> = [];
      for (
        let fromId = Math.floor(Number(range.min) / input.batchSize) * input.batchSize;
        fromId <= Number(range.max);
        fromId += input.batchSize
      ) {
        batches.push({ fromId, toId: fromId + input.batchSize });
      }
      return { batches };
    },

    total: ({ steps }) => ({
      batches: steps.copyBatches.length,
      rowsCopied: steps.copyBatches.reduce((sum, batch) => sum + batch.copied, 0),
    }),
  });
}

/** `backfill-batch` bound to its handler: the copy of one id range `[fromId, toId)`. */
export function backfillBatchRegistration(): WorkflowRegistration<typeof backfillBatch> {
  return backfillBatchHandlers<AppDatabase>({
    async copyBatch(ctx) {
      const { input, tx } = ctx;
      // No ON CONFLICT on purpose: billing.account's primary key makes a batch applied twice an
      // error instead of a silent no-op, so the example would show it if the ledger failed.
      const inserted = await tx
        .insertInto('billing.account')
        .columns(['id', 'email', 'balance_cents'])
        .expression((eb) =>
          eb
            .selectFrom('legacy.account')
            .select([
              'id',
              sql<string>`lower(trim(email))`.as('email'),
              sql<number>`round(balance_euros * 100)::bigint`.as('balance_cents'),
            ])
            .where('id', '>=', input.fromId)
            .where('id', '<', input.toId),
        )
        .executeTakeFirst();
      const copied = Number(inserted.numInsertedOrUpdatedRows ?? 0n);
      await tx
        .insertInto('billing.backfill_progress')
        .values({ job: input.job, rows_copied: copied, batches: 1 })
        .onConflict((oc) =>
          oc.column('job').doUpdateSet({
            rows_copied: sql`billing.backfill_progress.rows_copied + excluded.rows_copied`,
            batches: sql`billing.backfill_progress.batches + 1`,
          }),
        )
        .execute();
      return ctx.record({ copied });
    },
  });
}
