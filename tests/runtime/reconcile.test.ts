import { afterEach, beforeAll, expect, it } from 'vitest';
import { createWorker, type Worker, type WorkerOptions } from 'ledgerflow/runtime';
import { runReconcilePass } from 'ledgerflow/operator';
import { configureFaults, type FaultPointName } from 'ledgerflow/testing';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { eventLog, startTestRun, runState } from './fixtures/run-helpers.js';
import { chargeHandlers, receiptControl, receiptHandlers } from './fixtures/test-handlers.js';
import { ALL_TEST_WORKFLOWS, charge, receipt, receiptOnce } from './fixtures/test-workflows.js';

const FAST: Partial<WorkerOptions> = { pollIntervalMs: 20, leaseMs: 5_000, reconcileIntervalMs: 0 };
/** Far enough ahead that every intent is due (lease + perform timeout have passed). */
const LATER = (): Date => new Date(Date.now() + 3_600_000);

/** Makes the next pass through `point` throw once, as a crash-free stand-in for dying there. */
const throwOnceAt = (point: FaultPointName): void =>
  configureFaults({ seed: 11, points: { [point]: { probability: 1, actions: ['throw'], times: 1 } } });

describeStores('external intents: reconciliation in the worker and in the reconciler pass', (getStore) => {
  const workers: Worker[] = [];
  const worker = (options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({ store: getStore(), ...FAST, ...options });
    workers.push(w);
    return w;
  };
  beforeAll(() => migrateForTest(getStore(), ALL_TEST_WORKFLOWS).then(() => undefined));
  afterEach(async () => {
    configureFaults(undefined);
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
  });

  it('after a failure following perform, the next attempt reconciles (found) instead of sending again', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const control = receiptControl();
    throwOnceAt('after-perform');
    const runId = await startTestRun(store, receipt, { orderId: 'rc-found', email: 'a@example.com' });
    await worker({ workflows: [receiptHandlers(email, control)] }).drain();

    const { run, attempts, effects, results } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(email.sentForReference('receipt:rc-found')).toBe(1);
    expect(control.reconcileCalls).toBe(1);
    expect(attempts.map((a) => `${a.attempt}:${a.status}`)).toEqual(['1:failed', '2:succeeded']);
    expect(attempts[0]!.error).toMatchObject({ name: 'InjectedFaultError' });
    expect(effects).toEqual([
      expect.objectContaining({
        status: 'recorded',
        attempt: 1,
        resolution: 'found by reconcile in attempt 2',
        effect: { messageId: email.messages()[0]!.messageId },
      }),
    ]);
    expect(results[0]).toMatchObject({ attempt: 1 });
  });

  it('when the attempt failed before calling perform, its intent is released at once and the same key is performed once, without a lookup', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const control = receiptControl();
    throwOnceAt('after-intent-commit');
    const runId = await startTestRun(store, receipt, { orderId: 'rc-not-sent', email: 'a@example.com' });
    await worker({ workflows: [receiptHandlers(email, control)] }).drain();

    const { run, attempts, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(email.sentForReference('receipt:rc-not-sent')).toBe(1);
    expect(control.reconcileCalls).toBe(0);
    expect(attempts.map((a) => `${a.attempt}:${a.status}`)).toEqual(['1:failed', '2:succeeded']);
    expect(effects).toEqual([
      expect.objectContaining({ status: 'recorded', attempt: 2, idempotency_key: 'receipt:rc-not-sent' }),
    ]);
    expect(effects[0]!.resolution).toContain('attempt 1 failed before calling perform');
  });

  it('parks the run when reconcile cannot tell, and a later pass that finds the effect completes it', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const control = receiptControl();
    control.reconcile = 'unknown';
    throwOnceAt('after-perform');
    const runId = await startTestRun(store, receipt, { orderId: 'rc-unknown', email: 'a@example.com' });
    const log = eventLog();
    await worker({ workflows: [receiptHandlers(email, control)], onEvent: log.onEvent }).drain();

    const parked = await runState(store, runId);
    expect(parked.run.status).toBe('needs_reconciliation');
    expect(parked.run.lease_owner).toBeNull();
    expect(parked.run.error).toMatchObject({
      name: 'NeedsReconciliation',
      step: 'receipt',
      key: 'receipt:rc-unknown',
      message: expect.stringContaining('the provider lookup is down'),
    });
    expect(parked.effects.map((e) => e.status)).toEqual(['intent']);
    // The worker asked once and could not tell: the next lookup waits the first backoff (5 s).
    expect(parked.effects[0]).toMatchObject({ reconcile_attempts: 1 });
    expect(parked.effects[0]!.reconcile_after!.getTime() - parked.run.updated_at.getTime()).toBe(5_000);
    expect(log.events.some((e) => e.type === 'run-parked')).toBe(true);

    control.reconcile = 'lookup';
    const report = await runReconcilePass({
      store,
      workflows: [receiptHandlers(email, control)],
      now: LATER(),
      leaseMs: 5_000,
    });
    expect(report).toMatchObject({ examined: 1, recorded: 1, released: 0, parked: 0, skipped: 0 });
    expect(report.items[0]).toMatchObject({
      runId,
      step: 'receipt',
      key: 'receipt:rc-unknown',
      intentAttempt: 1,
      outcome: 'recorded',
    });

    const { run, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(run.output).toEqual({ receipt: { messageId: email.messages()[0]!.messageId } });
    expect(effects[0]).toMatchObject({ status: 'recorded', resolution: 'found by the reconciler' });
    expect(email.sentForReference('receipt:rc-unknown')).toBe(1);
  });

  it('the pass leaves intents alone before their horizon, then releases one the provider never saw for a same-key retry', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    // The worker "dies" between the intent commit and perform: stopped abruptly while hung there.
    configureFaults({
      seed: 5,
      points: { 'after-intent-commit': { probability: 1, actions: ['hang'], hangMs: 1_000, times: 1 } },
    });
    const runId = await startTestRun(store, receipt, { orderId: 'rc-pass-release', email: 'a@example.com' });
    const log = eventLog();
    const first = worker({ workflows: [receiptHandlers(email)], onEvent: log.onEvent });
    await first.start();
    await log.waitFor('run-claimed', (e) => e.runId === runId);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await first.stop({ timeoutMs: 10 });

    const registration = receiptHandlers(email);
    const early = await runReconcilePass({ store, workflows: [registration], leaseMs: 5_000 });
    expect(early).toMatchObject({ examined: 0, items: [] });
    const [intent] = (await runState(store, runId)).effects;
    // The horizon is the writer's: intent time + its lease (5 000) + the perform timeout (500).
    expect(intent!.reconcile_after!.getTime() - intent!.intent_at.getTime()).toBe(5_500);

    const report = await runReconcilePass({ store, workflows: [registration], now: LATER(), leaseMs: 5_000 });
    expect(report).toMatchObject({ examined: 1, released: 1 });
    const released = await runState(store, runId);
    expect(released.run).toMatchObject({ status: 'pending', lease_owner: null });
    expect(released.effects).toEqual([
      expect.objectContaining({ status: 'released', resolution: expect.stringContaining('not found') }),
    ]);

    await worker({ workflows: [registration] }).drain();
    const { run, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(effects[0]).toMatchObject({ status: 'recorded', attempt: 2 });
    expect(email.sentForReference('receipt:rc-pass-release')).toBe(1);
  });

  it('exhausting attempts with an open intent parks the run and the pass records it; an attempt that never called out fails at once', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const registration = receiptHandlers(email, receiptControl(), receiptOnce);

    throwOnceAt('after-perform');
    const sentRun = await startTestRun(store, receiptOnce, { orderId: 'rc-exhausted-sent', email: 'a@example.com' });
    await worker({ workflows: [registration] }).drain();
    throwOnceAt('after-intent-commit');
    const unsentRun = await startTestRun(store, receiptOnce, {
      orderId: 'rc-exhausted-unsent',
      email: 'a@example.com',
    });
    await worker({ workflows: [registration] }).drain();

    const sent = await runState(store, sentRun);
    expect(sent.run.status).toBe('needs_reconciliation');
    expect(sent.run.error).toMatchObject({ exhausted: true, lastError: { name: 'InjectedFaultError' } });
    expect((sent.run.error as { message: string }).message).toContain('attempts exhausted (1/1)');
    // perform returned before the failure: the call is over, so the intent is due at once.
    expect(sent.effects[0]!.reconcile_after!.getTime()).toBeLessThanOrEqual(sent.attempts[0]!.finished_at!.getTime());
    const unsent = await runState(store, unsentRun);
    expect(unsent.run.status).toBe('failed');
    expect(unsent.run.error).toMatchObject({ name: 'InjectedFaultError' });
    expect(unsent.effects.map((e) => e.status)).toEqual(['released']);

    const report = await runReconcilePass({ store, workflows: [registration], leaseMs: 5_000 });
    expect(report).toMatchObject({ examined: 1, recorded: 1 });
    expect((await runState(store, sentRun)).run.status).toBe('completed');
    expect(email.sentForReference('receipt:rc-exhausted-sent')).toBe(1);
    expect(email.sentForReference('receipt:rc-exhausted-unsent')).toBe(0);
  });

  it('a worker that finds an intent from a crashed attempt waits until lease + perform timeout, then reconciles', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const control = receiptControl();
    // The first worker "dies" after perform: its step hangs there and it is stopped abruptly
    // (stop waits ~1 s for the hung step; the lease is long enough that the intent is not due yet).
    configureFaults({
      seed: 3,
      points: { 'after-perform': { probability: 1, actions: ['hang'], hangMs: 2_000, times: 1 } },
    });
    const runId = await startTestRun(store, receipt, { orderId: 'rc-crashed', email: 'a@example.com' });
    const firstLog = eventLog();
    const first = worker({
      workflows: [receiptHandlers(email, control)],
      leaseMs: 2_000,
      heartbeatMs: 500,
      onEvent: firstLog.onEvent,
    });
    await first.start();
    await new Promise<void>((resolve) => {
      const check = (): void =>
        email.sentForReference('receipt:rc-crashed') === 1 ? resolve() : void setTimeout(check, 10);
      check();
    });
    await first.stop({ timeoutMs: 10 });

    const log = eventLog();
    await worker({
      workflows: [receiptHandlers(email, control)],
      leaseMs: 2_000,
      heartbeatMs: 500,
      onEvent: log.onEvent,
    }).drain();

    const rescheduled = log.events.find((e) => e.type === 'run-rescheduled');
    expect(rescheduled).toMatchObject({ runId, step: 'receipt' });
    const { run, attempts, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(
      attempts.map((a) => `${a.attempt}:${a.status}:${(a.error as { name?: string } | null)?.name ?? ''}`),
    ).toEqual(['1:abandoned:WorkerStopped', '2:abandoned:AwaitingIntent', '3:succeeded:']);
    // The wait is measured on the database clock from the intent, never on the worker's.
    const intentAt = effects[0]!.intent_at.getTime();
    expect(attempts[1]!.next_eligible_at!.getTime() - intentAt).toBe(2_000 + 500);
    expect(attempts[2]!.started_at.getTime()).toBeGreaterThanOrEqual(intentAt + 2_500);
    expect(email.sentForReference('receipt:rc-crashed')).toBe(1);
    expect(control.reconcileCalls).toBe(1);
  });

  it('a perform that timed out may still be in flight: the retry is scheduled at the intent horizon, then reconciles', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const control = receiptControl();
    control.perform = 'slow-once';
    const runId = await startTestRun(store, receipt, { orderId: 'rc-timeout', email: 'a@example.com' });
    const log = eventLog();
    await worker({
      workflows: [receiptHandlers(email, control)],
      leaseMs: 1_000,
      heartbeatMs: 300,
      onEvent: log.onEvent,
    }).drain();

    const { run, attempts, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(attempts[0]).toMatchObject({
      attempt: 1,
      status: 'failed',
      error: expect.objectContaining({ name: 'PerformTimeoutError' }),
    });
    // Not after the 20 ms retry backoff: at the horizon, intent time + lease + perform timeout.
    expect(attempts[0]!.next_eligible_at!.getTime()).toBe(effects[0]!.intent_at.getTime() + 1_000 + 500);
    const reconciledBy = attempts.at(-1)!;
    expect(reconciledBy.status).toBe('succeeded');
    expect(reconciledBy.started_at.getTime()).toBeGreaterThanOrEqual(effects[0]!.intent_at.getTime() + 1_000 + 500);
    expect(effects[0]).toMatchObject({ status: 'recorded', attempt: 1 });
    expect(email.sentForReference('receipt:rc-timeout')).toBe(1);
    expect(control.reconcileCalls).toBe(1);
  });

  for (const thrown of ['client-timeout', 'reset', 'non-retryable'] as const) {
    it(`a perform that throws on its own (${thrown}) has an unknown outcome: a provider that applies late gets one request`, async () => {
      const store = getStore();
      // The email provider applies the request 300 ms after receiving it; the handler gives up
      // at 100 ms (or its connection resets, or it calls the failure final) — and the provider
      // applies it anyway. Before this fix the next attempt asked at once, heard "not found",
      // and sent a second email.
      const email = new FakeEmailProvider({ applyDelayMs: 300 });
      const control = receiptControl();
      control.perform = thrown;
      const orderId = `rc-thrown-${thrown}`;
      const runId = await startTestRun(store, receipt, { orderId, email: 'a@example.com' });
      await worker({ workflows: [receiptHandlers(email, control)], leaseMs: 1_000, heartbeatMs: 300 }).drain();
      if (thrown === 'non-retryable') {
        // Refused for good but maybe applied: the run parks rather than fail; the pass settles it.
        expect((await runState(store, runId)).run.status).toBe('needs_reconciliation');
        await email.whenIdle();
        await runReconcilePass({ store, workflows: [receiptHandlers(email, control)], now: LATER(), leaseMs: 1_000 });
      }
      await email.whenIdle();
      const { run, attempts, effects } = await runState(store, runId);
      expect(run.status).toBe('completed');
      expect(email.sentForReference(`receipt:${orderId}`)).toBe(1);
      expect(effects).toEqual([expect.objectContaining({ status: 'recorded', attempt: 1 })]);
      expect(attempts[0]).toMatchObject({ attempt: 1, status: 'failed' });
    });
  }

  it('NotAppliedError from perform (the provider refused it) releases the intent at once and fails the run', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const control = receiptControl();
    control.perform = 'refuse';
    const runId = await startTestRun(store, receipt, { orderId: 'rc-refused', email: 'nobody@example.com' });
    await worker({ workflows: [receiptHandlers(email, control)] }).drain();

    const { run, effects, attempts } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ name: 'NotAppliedError', message: 'mailbox does not exist' });
    expect(attempts.map((a) => a.status)).toEqual(['failed']);
    expect(effects).toEqual([
      expect.objectContaining({ status: 'released', resolution: expect.stringContaining('NotAppliedError') }),
    ]);
    expect(control.reconcileCalls).toBe(0);
    expect(email.totalSent()).toBe(0);
  });

  it('a retryable NotAppliedError (e.g. 429) releases the intent and the next attempt performs the same key at once', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const control = receiptControl();
    control.perform = 'rate-limited-once';
    const runId = await startTestRun(store, receipt, { orderId: 'rc-429', email: 'a@example.com' });
    await worker({ workflows: [receiptHandlers(email, control)] }).drain();

    const { run, effects, attempts } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(attempts.map((a) => a.status)).toEqual(['failed', 'succeeded']);
    expect(effects).toEqual([expect.objectContaining({ status: 'recorded', attempt: 2 })]);
    expect(control.reconcileCalls).toBe(0);
    expect(email.sentForReference('receipt:rc-429')).toBe(1);
  });

  it('an idempotentByKey step without reconcile that exhausts its attempts releases its intent and fails', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    payments.failNext(10, 'before-apply');
    const runId = await startTestRun(store, charge, { orderId: 'rc-charge-exhausted', amountCents: 700 });
    await worker({ workflows: [chargeHandlers(payments)] }).drain();

    const { run, effects, attempts } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({
      name: 'ProviderUnavailableError',
      message: expect.stringContaining('payment provider unavailable'),
    });
    expect(attempts.map((a) => a.status)).toEqual(['failed', 'failed', 'failed', 'failed']);
    expect(effects).toEqual([
      expect.objectContaining({
        status: 'released',
        resolution: expect.stringContaining('the provider dedupes by key'),
      }),
    ]);
    expect(payments.totalCharges()).toBe(0);
  });
});
