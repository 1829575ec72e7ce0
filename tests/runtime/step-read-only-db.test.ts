import { sql } from 'kysely';
import { beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker } from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { appRows, runState, setupAppSchema, startTestRun } from './fixtures/run-helpers.js';
import type { AppDatabase } from './fixtures/test-workflows.js';

/**
 * `ctx.db` of a `step` handler: the run's own database, read-only — on PostgreSQL and on the
 * embedded PGlite alike (where a handler's own pool could not connect at all).
 */
const lookup = workflow('wt-read-only', {
  version: 1,
  input: z.object({ orderId: z.string(), write: z.boolean() }),
}).step('count', {
  output: z.object({ reservations: z.number().int(), viaSql: z.number().int() }),
  retry: { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 10, jitter: 0 },
});

describeStores('step handlers read through the read-only ctx.db', (getStore) => {
  let calls = 0;
  const registration = bindHandlers<typeof lookup, AppDatabase>(
    lookup,
    {
      count: async ({ db, input }) => {
        calls += 1;
        if (input.write) {
          // The contract type has no insertInto; a raw statement gets past the type, not the database.
          await sql`INSERT INTO wt_app.reservation (run_id, order_id, quantity) VALUES (gen_random_uuid(), ${input.orderId}, 1)`.execute(
            db,
          );
        }
        const rows = await db
          .selectFrom('wt_app.reservation')
          .select('id')
          .where('order_id', '=', input.orderId)
          .execute();
        const { rows: counted } = await sql<{
          n: number;
        }>`SELECT count(*)::int AS n FROM wt_app.reservation WHERE order_id = ${input.orderId}`.execute(db);
        return { reservations: rows.length, viaSql: counted[0]!.n };
      },
    },
    shapeHash(lookup),
  );

  beforeAll(async () => {
    await migrateForTest(getStore(), [lookup]);
    await setupAppSchema(getStore());
  });

  it('reads the application tables, with the query builder and with raw SQL', async () => {
    const store = getStore();
    await sql`INSERT INTO wt_app.reservation (run_id, order_id, quantity) VALUES (gen_random_uuid(), 'ro-1', 2), (gen_random_uuid(), 'ro-1', 3)`.execute(
      store.db,
    );
    const runId = await startTestRun(store, lookup, { orderId: 'ro-1', write: false });
    const worker = createWorker({ store, workflows: [registration], pollIntervalMs: 20, reconcileIntervalMs: 0 });
    await worker.drain();
    await worker.stop();
    const { run } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(run.output).toEqual({ count: { reservations: 2, viaSql: 2 } });
  });

  it('refuses a write: the run fails at once with ReadOnlyStepError, nothing is written', async () => {
    const store = getStore();
    calls = 0;
    const runId = await startTestRun(store, lookup, { orderId: 'ro-write', write: true });
    const worker = createWorker({ store, workflows: [registration], pollIntervalMs: 20, reconcileIntervalMs: 0 });
    await worker.drain();
    await worker.stop();
    const { run, attempts } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({
      name: 'ReadOnlyStepError',
      message: expect.stringContaining('Write in a transactional step, through ctx.tx'),
    });
    expect(attempts).toHaveLength(1);
    expect(calls).toBe(1);
    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM wt_app.reservation WHERE order_id = 'ro-write'`.execute(store.db);
    expect(rows[0]!.n).toBe(0);
    expect(await appRows(store, runId)).toEqual([]);
  });
});
