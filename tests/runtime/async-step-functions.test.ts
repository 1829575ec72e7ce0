import { afterEach, beforeAll, expect, it } from 'vitest';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker, type Worker } from 'ledgerflow/runtime';
import { z } from 'zod';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runState, startTestRun } from './fixtures/run-helpers.js';

const fast = { initialDelayMs: 20, maxDelayMs: 200, backoffFactor: 2, jitter: 0, maxAttempts: 3 } as const;

/**
 * A key (and every other function the runtime evaluates for a step) must be synchronous: the DSL
 * types refuse a Promise (the `@ts-expect-error`s below), codegen refuses an `async` one (LF002),
 * and a worker that meets one anyway (JavaScript, a cast) fails the attempt with a non-retryable
 * error instead of awaiting it.
 */
const asyncKey = workflow('wt-async-key', { version: 1, input: z.object({ orderId: z.string() }) }).external('charge', {
  output: z.object({ chargeId: z.string() }),
  // @ts-expect-error a key returns a string, never a Promise
  key: async ({ input }) => `charge:${input.orderId}`,
  idempotentByKey: true,
  retry: fast,
});

const asyncCondition = workflow('wt-async-when', { version: 1, input: z.object({ vip: z.boolean() }) }).step('greet', {
  output: z.object({ text: z.string() }),
  // @ts-expect-error a condition returns a boolean, never a Promise
  when: async ({ input }) => input.vip,
  retry: fast,
});

describeStores('worker: a step function that returns a Promise', (getStore) => {
  const workers: Worker[] = [];
  let performed = 0;
  beforeAll(async () => {
    await migrateForTest(getStore(), [asyncKey, asyncCondition]);
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });
  const drain = async (): Promise<void> => {
    const worker = createWorker({
      store: getStore(),
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      workflows: [
        bindHandlers(
          asyncKey,
          { charge: { perform: async () => ({ chargeId: `ch_${++performed}` }) } },
          shapeHash(asyncKey),
        ),
        bindHandlers(asyncCondition, { greet: () => ({ text: 'hello' }) }, shapeHash(asyncCondition)),
      ],
    });
    workers.push(worker);
    await worker.drain();
  };

  it('fails an async key at once, non-retryable, without calling the provider', async () => {
    const runId = await startTestRun(getStore(), asyncKey, { orderId: 'o-1' });
    await drain();
    const { run, attempts, effects } = await runState(getStore(), runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({
      name: 'NonRetryableError',
      message: expect.stringContaining('The key function of step "charge" returned a Promise (is it async?)'),
    });
    expect(attempts.map((a) => a.status)).toEqual(['failed']);
    expect(effects).toEqual([]);
    expect(performed).toBe(0);
  });

  it('fails an async condition at once, non-retryable, without running the step', async () => {
    const runId = await startTestRun(getStore(), asyncCondition, { vip: true });
    await drain();
    const { run, attempts } = await runState(getStore(), runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({
      name: 'NonRetryableError',
      message: expect.stringContaining('The condition (when) of step "greet" returned a Promise'),
    });
    expect(attempts.map((a) => a.status)).toEqual(['failed']);
  });
});
