import type { Kysely } from 'kysely';
import type { Client } from 'ledgerflow/runtime';
import type { AppDatabase } from '../migrations/app-database.js';
import { backfillBatch } from './backfill-batch.workflow.js';

export interface BackfillPlan {
  /** Batches the id range was cut into. */
  readonly batches: number;
  /** Runs this call created; the others already existed (an earlier, possibly killed, driver run). */
  readonly created: number;
}

/**
 * The driver: cuts `legacy.account`'s id range into `[fromId, fromId + batchSize)` ranges
 * aligned to multiples of `batchSize` and starts one `backfill-batch` run per range, with
 * dedupe key `batch:legacy.account:<fromId>`. Run it as often as you like: existing batches
 * come back with `created: false`. Changing `batchSize` for a backfill that has begun is
 * refused (`DuplicateRunError`: same dedupe key, different range) rather than copying rows twice.
 *
 * @example
 * const plan = await enqueueBackfill(client, store.db.withTables<AppDatabase>(), { job: 'accounts-v2', batchSize: 500 });
 * // then run workers until the runs complete: `npx ledgerflow worker --workflows ...`
 */
export async function enqueueBackfill<DB extends AppDatabase>(
  client: Client,
  db: Kysely<DB>,
  options: { readonly job: string; readonly batchSize: number },
): Promise<BackfillPlan> {
  const { job, batchSize } = options;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new TypeError(`batchSize must be a positive integer (got ${batchSize}).`);
  const app = db as unknown as Kysely<AppDatabase>;
  const range = await app
    .selectFrom('legacy.account')
    .select((eb) => [eb.fn.min<number | null>('id').as('min'), eb.fn.max<number | null>('id').as('max')])
    .executeTakeFirstOrThrow();
  if (range.min === null || range.max === null) return { batches: 0, created: 0 };
  let batches = 0;
  let created = 0;
  for (let fromId = Math.floor(Number(range.min) / batchSize) * batchSize; fromId <= Number(range.max); fromId += batchSize) {
    const started = await client.start(
      backfillBatch,
      { job, fromId, toId: fromId + batchSize },
      { dedupeKey: `batch:legacy.account:${fromId}` },
    );
    batches += 1;
    if (started.created) created += 1;
  }
  return { batches, created };
}
