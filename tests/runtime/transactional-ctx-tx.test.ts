import { sql, type Transaction } from 'kysely';
import { beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker, NonRetryableError, type Store } from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { appRows, runState, setupAppSchema, startTestRun } from './fixtures/run-helpers.js';
import type { AppDatabase } from './fixtures/test-workflows.js';

/**
 * `ctx.tx` of a `transactional` step is a Kysely `Transaction` the worker builds only when the
 * handler reads it. Whenever it is built, it behaves as the `Transaction` Kysely hands a
 * `transaction().execute()` callback: statements run one at a time inside the step's
 * transaction, nested transactions are refused, and once the handler has returned or thrown
 * nothing more goes through it — not through a handle kept from the handler, nor through one
 * first read from a kept context after the handler ended.
 */
const mode = z.enum(['keep-tx', 'keep-context', 'keep-tx-then-throw', 'nested', 'parallel', 'record-only']);
const txWorkflow = workflow('wt-ctx-tx', { version: 1, input: z.object({ orderId: z.string(), mode }) }).transactional(
  'write',
  {
    output: z.object({ written: z.number().int() }),
    key: ({ input }) => `ctx-tx:${input.orderId}`,
    retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10, jitter: 0 },
  },
);

type Tx = Transaction<AppDatabase>;

describeStores('ctx.tx of a transactional step', (getStore) => {
  const kept = new Map<string, { tx?: Tx; context?: { readonly tx: Tx }; nestedError?: unknown }>();
  const registration = bindHandlers<typeof txWorkflow, AppDatabase>(
    txWorkflow,
    {
      write: async (ctx) => {
        const { orderId } = ctx.input;
        const insert = (tx: Tx) =>
          tx.insertInto('wt_app.reservation').values({ run_id: ctx.runId, order_id: orderId, quantity: 1 }).execute();
        switch (ctx.input.mode) {
          case 'keep-tx':
            kept.set(orderId, { tx: ctx.tx });
            await insert(ctx.tx);
            return ctx.record({ written: 1 });
          case 'keep-context':
            // ctx.tx is never read while the handler runs.
            kept.set(orderId, { context: ctx });
            return ctx.record({ written: 0 });
          case 'keep-tx-then-throw':
            kept.set(orderId, { tx: ctx.tx });
            await insert(ctx.tx);
            throw new NonRetryableError('the handler gives up after writing');
          case 'nested': {
            let nestedError: unknown;
            try {
              await ctx.tx.transaction().execute(async () => {});
            } catch (error) {
              nestedError = error;
            }
            kept.set(orderId, { nestedError });
            await insert(ctx.tx);
            return ctx.record({ written: 1 });
          }
          case 'parallel':
            await Promise.all([insert(ctx.tx), insert(ctx.tx), insert(ctx.tx)]);
            return ctx.record({ written: 3 });
          case 'record-only':
            return ctx.record({ written: 0 });
        }
      },
    },
    shapeHash(txWorkflow),
  );

  beforeAll(async () => {
    await migrateForTest(getStore(), [txWorkflow]);
    await setupAppSchema(getStore());
  });

  async function run(store: Store, orderId: string, m: z.infer<typeof mode>): Promise<string> {
    const runId = await startTestRun(store, txWorkflow, { orderId, mode: m });
    const worker = createWorker({ store, workflows: [registration], pollIntervalMs: 20, reconcileIntervalMs: 0 });
    await worker.drain();
    await worker.stop();
    return runId;
  }

  const late = (tx: Tx, runId: string) =>
    tx.insertInto('wt_app.reservation').values({ run_id: runId, order_id: 'late', quantity: 1 }).execute();

  it("a handle kept after the handler returned is refused; only the handler's write committed", async () => {
    const store = getStore();
    const runId = await run(store, 'keep-tx', 'keep-tx');
    expect((await runState(store, runId)).run.status).toBe('completed');
    await expect(late(kept.get('keep-tx')!.tx!, runId)).rejects.toThrow('Transaction is already committed');
    expect(await appRows(store, runId)).toHaveLength(1);
  });

  it('ctx.tx first read from a kept context after the handler returned is refused too', async () => {
    const store = getStore();
    const runId = await run(store, 'keep-context', 'keep-context');
    const { run: settled, effects } = await runState(store, runId);
    expect(settled.status).toBe('completed');
    expect(effects).toMatchObject([{ status: 'recorded' }]);
    await expect(late(kept.get('keep-context')!.context!.tx, runId)).rejects.toThrow(
      'Transaction is already committed',
    );
    expect(await appRows(store, runId)).toEqual([]);
  });

  it('after the handler threw, its write is rolled back and the kept handle is refused', async () => {
    const store = getStore();
    const runId = await run(store, 'keep-tx-then-throw', 'keep-tx-then-throw');
    expect((await runState(store, runId)).run.status).toBe('failed');
    await expect(late(kept.get('keep-tx-then-throw')!.tx!, runId)).rejects.toThrow(
      'Transaction is already rolled back',
    );
    expect(await appRows(store, runId)).toEqual([]);
  });

  it('refuses a nested transaction and still commits the step', async () => {
    const store = getStore();
    const runId = await run(store, 'nested', 'nested');
    expect(kept.get('nested')!.nestedError).toMatchObject({
      message: 'calling the transaction method for a Transaction is not supported',
    });
    expect((await runState(store, runId)).run.status).toBe('completed');
    expect(await appRows(store, runId)).toHaveLength(1);
  });

  it("statements sent together run one after another, all inside the step's transaction", async () => {
    const store = getStore();
    const runId = await run(store, 'parallel', 'parallel');
    expect((await runState(store, runId)).run.output).toEqual({ write: { written: 3 } });
    expect(await appRows(store, runId)).toHaveLength(3);
  });

  it('a handler that never reads ctx.tx commits its recorded output', async () => {
    const store = getStore();
    const runId = await run(store, 'record-only', 'record-only');
    const { run: settled, effects } = await runState(store, runId);
    expect(settled.output).toEqual({ write: { written: 0 } });
    expect(effects).toMatchObject([{ status: 'recorded', effect: { written: 0 } }]);
    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM wt_app.reservation WHERE run_id = ${runId}`.execute(store.db);
    expect(rows[0]!.n).toBe(0);
  });
});
