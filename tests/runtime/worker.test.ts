import { sql } from 'kysely';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { createWorker, type Worker, type WorkerOptions } from 'ledgerflow/runtime';
import { configureFaults, type FaultPointName } from 'ledgerflow/testing';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { requestHash } from '../../runtime/worker/request-hash.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import type { TestStore } from '../support/test-stores.js';
import { appRows, eventLog, startTestRun, runState, setupAppSchema } from './fixtures/run-helpers.js';
import {
  chargeHandlers,
  flakyHandlers,
  invalidOutputHandlers,
  mixedHandlers,
  receiptHandlers,
  reserveHandlers,
  twoStepsHandlers,
} from './fixtures/test-handlers.js';
import {
  ALL_TEST_WORKFLOWS,
  charge,
  flaky,
  invalidOutput,
  mixed,
  receipt,
  reserve,
  twoSteps,
} from './fixtures/test-workflows.js';

const FAST: Partial<WorkerOptions> = { pollIntervalMs: 20, leaseMs: 5_000, reconcileIntervalMs: 0 };

describeStores('worker: step kinds end to end', (getStore) => {
  const workers: Worker[] = [];
  const worker = (options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({ store: getStore(), ...FAST, ...options });
    workers.push(w);
    return w;
  };
  beforeAll(async () => {
    await migrateForTest(getStore(), ALL_TEST_WORKFLOWS);
    await setupAppSchema(getStore());
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });

  it('runs plain steps in order, checkpointing each output and completing with all outputs', async () => {
    const store = getStore();
    const runId = await startTestRun(store, twoSteps, { n: 21 });
    await worker({ workflows: [twoStepsHandlers()] }).drain();

    const { run, attempts, results, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(run.output).toEqual({ double: { value: 42 }, describe: { text: 'value is 42' } });
    expect(run.lease_owner).toBeNull();
    expect(run.finished_at).not.toBeNull();
    expect(attempts.map((a) => [a.step_name, a.attempt, a.status])).toEqual([
      ['double', 1, 'succeeded'],
      ['describe', 1, 'succeeded'],
    ]);
    expect(results.map((r) => [r.step_name, r.output])).toEqual(
      expect.arrayContaining([
        ['double', { value: 42 }],
        ['describe', { text: 'value is 42' }],
      ]),
    );
    expect(effects).toEqual([]);
  });

  it('commits a transactional step with its own write, the ledger row and the result together', async () => {
    const store = getStore();
    const runId = await startTestRun(store, reserve, { orderId: 'o-tx-1', quantity: 3 });
    await worker({ workflows: [reserveHandlers()] }).drain();

    const { run, effects, results } = await runState(store, runId);
    const rows = await appRows(store, runId);
    expect(run.status).toBe('completed');
    expect(rows).toHaveLength(1);
    expect(effects).toHaveLength(1);
    expect(effects[0]).toMatchObject({
      idempotency_key: 'reserve:o-tx-1',
      status: 'recorded',
      kind: 'transactional',
      effect: { reservationId: rows[0]!.id },
      attempt: 1,
    });
    expect(effects[0]!.request_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(results[0]).toMatchObject({
      idempotency_key: 'reserve:o-tx-1',
      effect_status: 'recorded',
      output: { reservationId: rows[0]!.id },
    });
  });

  it('runs an external step through intent, perform and result commit (provider that dedupes)', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const runId = await startTestRun(store, charge, { orderId: 'o-ext-1', amountCents: 1200 });
    await worker({ workflows: [chargeHandlers(payments)] }).drain();

    const { run, effects, attempts } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(payments.chargesForKey('charge:o-ext-1')).toBe(1);
    const [charged] = payments.charges();
    expect(effects).toEqual([
      expect.objectContaining({
        idempotency_key: 'charge:o-ext-1',
        status: 'recorded',
        kind: 'external',
        effect: { chargeId: charged!.id },
      }),
    ]);
    expect(attempts.map((a) => a.status)).toEqual(['succeeded']);
  });

  it('runs an external step with reconcile (provider that does not dedupe)', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const runId = await startTestRun(store, receipt, { orderId: 'o-ext-2', email: 'a@example.com' });
    await worker({ workflows: [receiptHandlers(email)] }).drain();

    const { run, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(email.sentForReference('receipt:o-ext-2')).toBe(1);
    expect(effects[0]).toMatchObject({ status: 'recorded', effect: { messageId: email.messages()[0]!.messageId } });
  });

  it('runs every kind in one run; the ledger equals what the providers applied', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const email = new FakeEmailProvider();
    const runId = await startTestRun(store, mixed, { orderId: 'o-mixed-1', quantity: 2, email: 'b@example.com' });
    await worker({ workflows: [mixedHandlers(payments, email)] }).drain();

    const { run, effects, attempts } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(run.output).toMatchObject({ price: { amountCents: 500 }, charge: { chargeId: payments.charges()[0]!.id } });
    expect(attempts.map((a) => `${a.step_name}:${a.attempt}:${a.status}`)).toEqual([
      'price:1:succeeded',
      'reserve:1:succeeded',
      'charge:1:succeeded',
      'receipt:1:succeeded',
    ]);
    expect(effects.map((e) => e.status)).toEqual(['recorded', 'recorded', 'recorded']);
    expect(await appRows(store, runId)).toHaveLength(1);
    expect(payments.totalCharges()).toBe(1);
    expect(email.totalSent()).toBe(1);
  });
});

describeStores('worker: fault points inside a step', (getStore) => {
  const workers: Worker[] = [];
  const worker = (options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({ store: getStore(), ...FAST, ...options });
    workers.push(w);
    return w;
  };
  beforeAll(async () => {
    await migrateForTest(getStore(), ALL_TEST_WORKFLOWS);
    await setupAppSchema(getStore());
  });
  afterEach(async () => {
    configureFaults(undefined);
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });
  const throwOnceAt = (point: FaultPointName): void =>
    configureFaults({ seed: 5, points: { [point]: { probability: 1, actions: ['throw'], times: 1 } } });

  it('a failure inside the transactional handler rolls its writes back; the retry writes exactly once', async () => {
    const store = getStore();
    throwOnceAt('inside-transactional-handler');
    const runId = await startTestRun(store, reserve, { orderId: 'fp-tx', quantity: 1 });
    await worker({ workflows: [reserveHandlers()] }).drain();

    const { run, attempts, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(attempts.map((a) => `${a.attempt}:${a.status}`)).toEqual(['1:failed', '2:succeeded']);
    expect(attempts[0]!.error).toMatchObject({ name: 'InjectedFaultError' });
    expect(effects).toEqual([expect.objectContaining({ attempt: 2, status: 'recorded' })]);
    expect(await appRows(store, runId)).toHaveLength(1);
  });

  it('a failure before a step commit reruns the handler (at least once) and checkpoints once', async () => {
    const store = getStore();
    throwOnceAt('before-step-commit');
    const calls = new Map<string, number>();
    const runId = await startTestRun(store, flaky, { failTimes: 0, error: 'plain' });
    await worker({ workflows: [flakyHandlers(calls)] }).drain();

    const { run, attempts, results } = await runState(store, runId);
    expect(run.output).toEqual({ work: { calls: 2 } });
    expect(attempts.map((a) => a.status)).toEqual(['failed', 'succeeded']);
    expect(results).toHaveLength(1);
  });

  it('a failure right after the claim is a failed attempt like any other', async () => {
    const store = getStore();
    throwOnceAt('after-claim');
    const runId = await startTestRun(store, twoSteps, { n: 2 });
    await worker({ workflows: [twoStepsHandlers()] }).drain();
    const { run, attempts } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(attempts.map((a) => `${a.step_name}:${a.attempt}:${a.status}`)).toEqual([
      'double:1:failed',
      'double:2:succeeded',
      'describe:1:succeeded',
    ]);
  });
});

describeStores('worker: waking on NOTIFY', (getStore) => {
  beforeAll(() => migrateForTest(getStore(), ALL_TEST_WORKFLOWS).then(() => undefined));

  it('an idle worker is woken by the NOTIFY of start(), long before its next poll', async () => {
    const store = getStore();
    const log = eventLog();
    const w = createWorker({
      store,
      workflows: [twoStepsHandlers()],
      pollIntervalMs: 600_000,
      reconcileIntervalMs: 0,
      onEvent: log.onEvent,
    });
    await w.start();
    try {
      // Let the start-up claim find nothing, so the worker is asleep until woken.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const runId = await startTestRun(store, twoSteps, { n: 1 });
      await log.waitFor('run-completed', (e) => e.runId === runId);
      expect((await runState(store, runId)).run.status).toBe('completed');
    } finally {
      await w.stop();
    }
  });
});

describeStores('worker: retries, exhaustion and invalid output', (getStore) => {
  const workers: Worker[] = [];
  const worker = (options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({ store: getStore(), ...FAST, ...options });
    workers.push(w);
    return w;
  };
  beforeAll(() => migrateForTest(getStore(), ALL_TEST_WORKFLOWS).then(() => undefined));
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });

  it('retries with exponential backoff on the database clock and keeps every attempt', async () => {
    const store = getStore();
    const calls = new Map<string, number>();
    const runId = await startTestRun(store, flaky, { failTimes: 2, error: 'plain' });
    await worker({ workflows: [flakyHandlers(calls)] }).drain();

    const { run, attempts } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(run.output).toEqual({ work: { calls: 3 } });
    expect(attempts.map((a) => [a.attempt, a.status])).toEqual([
      [1, 'failed'],
      [2, 'failed'],
      [3, 'succeeded'],
    ]);
    expect(attempts[0]!.error).toMatchObject({
      name: 'Error',
      message: 'transient failure on call 1',
      step: 'work',
      attempt: 1,
    });
    expect(typeof (attempts[0]!.error as { stack?: unknown }).stack).toBe('string');
    // Policy: 20 ms then 40 ms, no jitter; both instants come from the database's now().
    const delays = attempts.slice(0, 2).map((a) => a.next_eligible_at!.getTime() - a.finished_at!.getTime());
    expect(delays).toEqual([20, 40]);
    expect(attempts[1]!.started_at.getTime()).toBeGreaterThanOrEqual(attempts[0]!.next_eligible_at!.getTime());
    expect(attempts[2]!.started_at.getTime()).toBeGreaterThanOrEqual(attempts[1]!.next_eligible_at!.getTime());
  });

  it('fails at once on NonRetryableError', async () => {
    const store = getStore();
    const runId = await startTestRun(store, flaky, { failTimes: 5, error: 'non-retryable' });
    const events = eventLog();
    await worker({ workflows: [flakyHandlers(new Map())], onEvent: events.onEvent }).drain();

    const { run, attempts } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ name: 'NonRetryableError', message: 'refused on call 1' });
    expect(attempts.map((a) => a.status)).toEqual(['failed']);
    expect(attempts[0]!.next_eligible_at).toBeNull();
    expect(events.events.find((e) => e.type === 'step-failed')).toMatchObject({
      outcome: { kind: 'failed', failures: 1 },
    });
  });

  it('fails at once on an error class the step declares non-retryable', async () => {
    const store = getStore();
    const runId = await startTestRun(store, flaky, { failTimes: 5, error: 'declined' });
    await worker({ workflows: [flakyHandlers(new Map())] }).drain();
    const { run, attempts } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ name: 'CardDeclinedError' });
    expect(attempts).toHaveLength(1);
  });

  it('fails the run with the last error once attempts are exhausted', async () => {
    const store = getStore();
    const runId = await startTestRun(store, flaky, { failTimes: 99, error: 'plain' });
    await worker({ workflows: [flakyHandlers(new Map())] }).drain();

    const { run, attempts } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.finished_at).not.toBeNull();
    expect(run.error).toMatchObject({ message: 'transient failure on call 3', attempt: 3 });
    expect(attempts.map((a) => [a.attempt, a.status])).toEqual([
      [1, 'failed'],
      [2, 'failed'],
      [3, 'failed'],
    ]);
  });

  it('rejects output that violates the step schema, naming the step and the field', async () => {
    const store = getStore();
    const runId = await startTestRun(store, invalidOutput, {});
    await worker({ workflows: [invalidOutputHandlers()] }).drain();

    const { run, attempts, results } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ name: 'ValidationError', code: 'validation' });
    const message = (run.error as { message: string }).message;
    expect(message).toContain('Step "compute" of workflow "wt-invalid-output" returned invalid output');
    expect(message).toContain('amountCents');
    expect(attempts.map((a) => a.status)).toEqual(['failed']);
    expect(results).toEqual([]);
  });
});

describeStores('worker: ledger conflicts', (getStore) => {
  const workers: Worker[] = [];
  const worker = (options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({ store: getStore(), ...FAST, ...options });
    workers.push(w);
    return w;
  };
  beforeAll(async () => {
    await migrateForTest(getStore(), ALL_TEST_WORKFLOWS);
    await setupAppSchema(getStore());
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });

  /** A ledger row the step did not write: as if an earlier deploy had used another key or request. */
  const plantEffect = async (
    store: TestStore,
    runId: string,
    row: {
      step: string;
      key: string;
      status: 'recorded' | 'intent';
      kind: 'transactional' | 'external';
      hash: string;
      effect?: object;
    },
  ): Promise<void> => {
    await sql`
      INSERT INTO ledgerflow.step_effect (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at, reconcile_after)
      VALUES (${runId}, ${row.step}, ${row.key}, ${JSON.stringify(row.effect ?? { planted: true })}::jsonb, ${row.status}, ${row.kind}, ${row.hash}, 1, 0,
              ${row.status === 'recorded' ? sql`now()` : sql`NULL`}, ${row.status === 'intent' ? sql`now()` : sql`NULL`})`.execute(
      store.db,
    );
  };

  it('fails with ConflictError when the step already has a ledger row under a different key; nothing is overwritten', async () => {
    const store = getStore();
    const runId = await startTestRun(store, reserve, { orderId: 'o-conflict-1', quantity: 1 });
    await plantEffect(store, runId, {
      step: 'reserve',
      key: 'reserve:OLD-KEY',
      status: 'recorded',
      kind: 'transactional',
      hash: 'h',
    });
    await worker({ workflows: [reserveHandlers()] }).drain();

    const { run, effects, attempts } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ name: 'ConflictError', code: 'conflict' });
    expect((run.error as { message: string }).message).toContain('"reserve:OLD-KEY"');
    expect(attempts).toHaveLength(1);
    expect(effects).toEqual([
      expect.objectContaining({ idempotency_key: 'reserve:OLD-KEY', effect: { planted: true }, request_hash: 'h' }),
    ]);
    expect(await appRows(store, runId)).toEqual([]);
  });

  it('fails with ConflictError when the key matches but the request hash differs; nothing is overwritten', async () => {
    const store = getStore();
    const runId = await startTestRun(store, reserve, { orderId: 'o-conflict-2', quantity: 1 });
    await plantEffect(store, runId, {
      step: 'reserve',
      key: 'reserve:o-conflict-2',
      status: 'recorded',
      kind: 'transactional',
      hash: 'other',
    });
    await worker({ workflows: [reserveHandlers()] }).drain();

    const { run, effects } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ name: 'ConflictError' });
    expect((run.error as { message: string }).message).toContain('different request');
    expect(effects).toEqual([expect.objectContaining({ request_hash: 'other', effect: { planted: true } })]);
    expect(await appRows(store, runId)).toEqual([]);
  });

  it('refuses an external intent under the same key with a different request, without calling the provider', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const runId = await startTestRun(store, charge, { orderId: 'o-conflict-3', amountCents: 500 });
    await plantEffect(store, runId, {
      step: 'charge',
      key: 'charge:o-conflict-3',
      status: 'intent',
      kind: 'external',
      hash: 'other',
    });
    await worker({ workflows: [chargeHandlers(payments)] }).drain();

    const { run, effects } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ name: 'ConflictError' });
    expect(effects).toEqual([expect.objectContaining({ status: 'intent', request_hash: 'other' })]);
    expect(payments.stats().requests).toBe(0);
  });

  it('reuses a recorded transactional effect instead of running the handler again', async () => {
    const store = getStore();
    const runId = await startTestRun(store, reserve, { orderId: 'o-reuse', quantity: 2 });
    // The hash the worker computes for request { quantity: 2 }.
    await plantEffect(store, runId, {
      step: 'reserve',
      key: 'reserve:o-reuse',
      status: 'recorded',
      kind: 'transactional',
      hash: requestHash({ quantity: 2 }),
      effect: { reservationId: 777 },
    });
    const events = eventLog();
    await worker({ workflows: [reserveHandlers()], onEvent: events.onEvent }).drain();

    const { run, results } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(results[0]!.output).toEqual({ reservationId: 777 });
    expect(await appRows(store, runId)).toEqual([]);
    expect(events.events.find((e) => e.type === 'step-succeeded')).toMatchObject({ reused: true });
  });
});
