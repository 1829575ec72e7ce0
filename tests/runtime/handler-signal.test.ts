import { beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker } from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runState, startTestRun } from './fixtures/run-helpers.js';

/**
 * A handler's `ctx.signal` is made when the handler first reads it. Read late — after its time
 * ran out — it is already aborted, with the same reason a signal read at the start got when it
 * fired; read while the handler still has time, it is not.
 */
const slow = workflow('wt-late-signal', { version: 1, input: z.object({ id: z.string() }) }).step('wait', {
  output: z.object({ ok: z.boolean() }),
  timeoutMs: 150,
  retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10, jitter: 0 },
});

describeStores('ctx.signal read late', (getStore) => {
  beforeAll(() => migrateForTest(getStore(), [slow]).then(() => undefined));

  it("is aborted with the time limit's error when first read after the step's time ran out", async () => {
    const store = getStore();
    const seen: { early?: boolean; aborted?: boolean; reason?: unknown } = {};
    let done!: () => void;
    const handlerDone = new Promise<void>((resolve) => (done = resolve));
    const registration = bindHandlers(
      slow,
      {
        wait: async (ctx) => {
          await new Promise((resolve) => setTimeout(resolve, 400));
          seen.aborted = ctx.signal.aborted;
          seen.reason = ctx.signal.reason;
          done();
          return { ok: true };
        },
      },
      shapeHash(slow),
    );
    const runId = await startTestRun(store, slow, { id: 'late' });
    const worker = createWorker({ store, workflows: [registration], pollIntervalMs: 20, reconcileIntervalMs: 0 });
    await worker.drain();
    await handlerDone;
    await worker.stop();
    expect(seen.aborted).toBe(true);
    expect(seen.reason).toMatchObject({
      name: 'HandlerTimeoutError',
      message: expect.stringContaining('did not finish within 150 ms'),
    });
    expect((await runState(store, runId)).run.status).toBe('failed');
  });

  it('is not aborted when read while the handler still has time', async () => {
    const store = getStore();
    let aborted: boolean | undefined;
    const registration = bindHandlers(
      slow,
      {
        wait: (ctx) => {
          aborted = ctx.signal.aborted;
          return { ok: true };
        },
      },
      shapeHash(slow),
    );
    const runId = await startTestRun(store, slow, { id: 'early' });
    const worker = createWorker({ store, workflows: [registration], pollIntervalMs: 20, reconcileIntervalMs: 0 });
    await worker.drain();
    await worker.stop();
    expect(aborted).toBe(false);
    expect((await runState(store, runId)).run.status).toBe('completed');
  });
});
