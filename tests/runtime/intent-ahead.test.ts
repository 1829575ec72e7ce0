import { afterEach, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import {
  bindHandlers,
  createWorker,
  found,
  notFound,
  type Worker,
  type WorkerOptions,
  type WorkflowRegistration,
} from 'ledgerflow/runtime';
import { configureFaults } from 'ledgerflow/testing';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { requestHash } from '../../runtime/worker/request-hash.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { eventLog, runState, startTestRun } from './fixtures/run-helpers.js';

/**
 * The intent of an `external` step written by the commit that moves the run to it
 * (step-commits.ts `NextIntent`) instead of by an intent commit of its own: it must be the row
 * the intent commit writes, and every rule about intents (release, re-take, take-over, the
 * horizon, the deadline) must hold for it unchanged.
 */
const input = z.object({ orderId: z.string(), email: z.string() });
const fast = { maxAttempts: 4, initialDelayMs: 10, maxDelayMs: 50 } as const;
const LEASE_MS = 5_000;
/** charge's perform timeout: longer than the late tests' slow charge. */
const CHARGE_TIMEOUT_MS = 3_000;
/** The late workflow's deadline, and how long its slow step takes: the step outlives the deadline by half. */
const LATE_DEADLINE_MS = 1_000;
const SLOW_STEP_MS = 1_500;

const steps = (name: string, timeoutMs?: number) =>
  workflow(name, { version: 1, input, ...(timeoutMs === undefined ? {} : { timeoutMs }) })
    .transactional('reserve', {
      output: z.object({ units: z.number().int() }),
      key: ({ input }) => `reserve:${input.orderId}`,
      retry: fast,
    })
    // Its request reads the output of the step whose commit writes its intent.
    .external('charge', {
      output: z.object({ chargeId: z.string() }),
      key: ({ input }) => `charge:${input.orderId}`,
      request: ({ steps }) => ({ amountCents: steps.reserve.units * 100 }),
      idempotentByKey: true,
      performTimeoutMs: CHARGE_TIMEOUT_MS,
      retry: fast,
    })
    // After an external step: the intent rides on charge's result commit.
    .external('receipt', {
      output: z.object({ messageId: z.string() }),
      key: ({ input }) => `receipt:${input.orderId}`,
      performTimeoutMs: 500,
      retry: fast,
    });

const ahead = steps('wt-intent-ahead');
/**
 * The same with a deadline that a slow step outlives. The deadline counts from the run's creation,
 * so the worker is started first: under load, claiming must not eat the time before the slow step.
 */
const late = steps('wt-intent-ahead-late', LATE_DEADLINE_MS);

/** `reserveMs`, `chargeMs`: how long reserve and charge take; `receiptStallMs`: how long receipt's perform stalls after sending. */
function handlers(
  wf: typeof ahead,
  payments: FakePaymentProvider,
  email: FakeEmailProvider,
  {
    reserveMs = 0,
    chargeMs = 0,
    receiptStallMs = 0,
  }: { readonly reserveMs?: number; readonly chargeMs?: number; readonly receiptStallMs?: number } = {},
): WorkflowRegistration {
  return bindHandlers(
    wf,
    {
      reserve: async ({ record }) => {
        if (reserveMs > 0) await new Promise((resolve) => setTimeout(resolve, reserveMs));
        return record({ units: 3 });
      },
      charge: {
        perform: async ({ key, input, steps }) => {
          if (chargeMs > 0) await new Promise((resolve) => setTimeout(resolve, chargeMs));
          const charged = await payments.charge(
            { reference: input.orderId, amountCents: steps.reserve.units * 100, currency: 'eur', customerId: 'c' },
            { idempotencyKey: key },
          );
          return { chargeId: charged.id };
        },
      },
      receipt: {
        perform: async ({ key, input }) => {
          const sent = await email.send({ to: input.email, subject: 'Receipt', body: input.orderId, reference: key });
          if (receiptStallMs > 0) await new Promise((resolve) => setTimeout(resolve, receiptStallMs));
          return { messageId: sent.messageId };
        },
        reconcile: async ({ key }) => {
          const [message] = await email.findByReference(key);
          return message ? found({ messageId: message.messageId }) : notFound();
        },
      },
    },
    shapeHash(wf),
  );
}

describeStores('an external step whose intent the previous commit wrote', (getStore) => {
  const workers: Worker[] = [];
  const worker = (options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({
      store: getStore(),
      pollIntervalMs: 20,
      leaseMs: LEASE_MS,
      reconcileIntervalMs: 0,
      ...options,
    });
    workers.push(w);
    return w;
  };
  beforeAll(() => migrateForTest(getStore(), [ahead, late]).then(() => undefined));
  afterEach(async () => {
    configureFaults(undefined);
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
  });

  it('is the row the intent commit writes, written by the same statement that opened the attempt, and a crash before perform is taken over under the same key', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const email = new FakeEmailProvider();
    // The worker "dies" between the intent and perform: it hangs there and is stopped abruptly.
    configureFaults({
      seed: 5,
      points: { 'after-intent-commit': { probability: 1, actions: ['hang'], hangMs: 1_500, times: 1 } },
    });
    const runId = await startTestRun(store, ahead, { orderId: 'ia-crash', email: 'a@example.com' });
    const log = eventLog();
    const first = worker({ workflows: [handlers(ahead, payments, email)], onEvent: log.onEvent });
    await first.start();
    await log.waitFor('step-succeeded', (e) => e.runId === runId && e.step === 'reserve');
    await new Promise((resolve) => setTimeout(resolve, 200));
    await first.stop({ timeoutMs: 10 });

    const held = await runState(store, runId);
    // The stopping worker gave the run back at charge; the intent stays, its outcome unknown.
    expect(held.run).toMatchObject({ status: 'pending', current_step: 1 });
    const intent = held.effects.find((e) => e.step_name === 'charge')!;
    const attempt = held.attempts.find((a) => a.step_name === 'charge')!;
    // What the step itself computes (effectClaim): its key, and the hash of its request, which
    // reads the output of the step whose commit wrote the intent.
    expect(intent).toMatchObject({
      idempotency_key: 'charge:ia-crash',
      status: 'intent',
      kind: 'external',
      request_hash: requestHash({ amountCents: 300 }),
      attempt: 1,
      fencing_token: held.run.fencing_token,
      effect: null,
    });
    expect(attempt).toMatchObject({ attempt: 1, status: 'abandoned' });
    // One statement wrote both: they share its statement_timestamp().
    expect(intent.intent_at.getTime()).toBe(attempt.started_at.getTime());
    // The writer's horizon: intent time + lease + perform timeout.
    expect(intent.reconcile_after!.getTime() - intent.intent_at.getTime()).toBe(LEASE_MS + CHARGE_TIMEOUT_MS);
    expect(payments.chargesForKey('charge:ia-crash')).toBe(0);

    // The provider dedupes by key: the next worker takes the intent over and performs with the same key.
    await worker({ workflows: [handlers(ahead, payments, email)] }).drain();
    const { run, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(effects.map((e) => `${e.step_name}:${e.status}`).sort()).toEqual([
      'charge:recorded',
      'receipt:recorded',
      'reserve:recorded',
    ]);
    expect(payments.chargesForKey('charge:ia-crash')).toBe(1);
    expect(email.sentForReference('receipt:ia-crash')).toBe(1);
  }, 20_000);

  it('an attempt that fails before perform releases it, and the next attempt takes it again under the same key and request', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const email = new FakeEmailProvider();
    configureFaults({ seed: 11, points: { 'after-intent-commit': { probability: 1, actions: ['throw'], times: 1 } } });
    const runId = await startTestRun(store, ahead, { orderId: 'ia-retake', email: 'a@example.com' });
    await worker({ workflows: [handlers(ahead, payments, email)] }).drain();

    const { run, attempts, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(attempts.filter((a) => a.step_name === 'charge').map((a) => `${a.attempt}:${a.status}`)).toEqual([
      '1:failed',
      '2:succeeded',
    ]);
    // The re-take matches the request hash: the one the commit before wrote is the step's own.
    expect(effects.find((e) => e.step_name === 'charge')).toMatchObject({
      status: 'recorded',
      attempt: 2,
      request_hash: requestHash({ amountCents: 300 }),
      resolution: expect.stringContaining('attempt 1 failed before calling perform'),
    });
    expect(payments.chargesForKey('charge:ia-retake')).toBe(1);
    expect(email.sentForReference('receipt:ia-retake')).toBe(1);
  });

  it('an intent written by a result commit (receipt after charge) waits for its horizon after a crash, then is reconciled, never sent twice', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const email = new FakeEmailProvider();
    const runId = await startTestRun(store, ahead, { orderId: 'ia-receipt', email: 'a@example.com' });
    const log = eventLog();
    // The worker "dies" after sending the receipt, before its answer is recorded.
    const first = worker({
      workflows: [handlers(ahead, payments, email, { receiptStallMs: 400 })],
      onEvent: log.onEvent,
    });
    await first.start();
    await log.waitFor('step-succeeded', (e) => e.runId === runId && e.step === 'charge');
    while (email.sentForReference('receipt:ia-receipt') === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await first.stop({ timeoutMs: 10 });

    const held = await runState(store, runId);
    const intent = held.effects.find((e) => e.step_name === 'receipt')!;
    const attempt = held.attempts.find((a) => a.step_name === 'receipt')!;
    expect(intent).toMatchObject({ status: 'intent', attempt: 1, idempotency_key: 'receipt:ia-receipt' });
    expect(intent.intent_at.getTime()).toBe(attempt.started_at.getTime());
    expect(email.sentForReference('receipt:ia-receipt')).toBe(1);

    await new Promise((resolve) => setTimeout(resolve, LEASE_MS + 500));
    await worker({ workflows: [handlers(ahead, payments, email)] }).drain();
    const { run, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(effects.find((e) => e.step_name === 'receipt')).toMatchObject({
      status: 'recorded',
      attempt: 1,
      resolution: 'found by reconcile in attempt 2',
    });
    expect(email.sentForReference('receipt:ia-receipt')).toBe(1);
  }, 20_000);

  it('a commit that finds the run past its deadline writes no intent: the run is cancelled and nothing is performed', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const email = new FakeEmailProvider();
    const log = eventLog();
    const w = worker({
      workflows: [handlers(late, payments, email, { reserveMs: SLOW_STEP_MS })],
      onEvent: log.onEvent,
    });
    await w.start();
    const runId = await startTestRun(store, late, { orderId: 'ia-late', email: 'a@example.com' });
    await log.waitFor('run-deadline-exceeded', (e) => e.runId === runId);

    const { run, effects, results } = await runState(store, runId);
    expect(run.status).toBe('cancelled');
    expect(results.map((r) => r.step_name)).toEqual(['reserve']);
    expect(effects.map((e) => [e.step_name, e.status])).toEqual([['reserve', 'recorded']]);
    expect(payments.chargesForKey('charge:ia-late')).toBe(0);
  });

  it('an external step whose result commit finds the run past its deadline: the next external step is neither opened nor performed', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const email = new FakeEmailProvider();
    const log = eventLog();
    const w = worker({
      workflows: [handlers(late, payments, email, { chargeMs: SLOW_STEP_MS })],
      onEvent: log.onEvent,
    });
    await w.start();
    const runId = await startTestRun(store, late, { orderId: 'ia-late-charge', email: 'a@example.com' });
    await log.waitFor('run-deadline-exceeded', (e) => e.runId === runId);

    const { run, effects, results } = await runState(store, runId);
    expect(run.status).toBe('cancelled');
    expect(results.map((r) => r.step_name).sort()).toEqual(['charge', 'reserve']);
    expect(effects.map((e) => `${e.step_name}:${e.status}`).sort()).toEqual(['charge:recorded', 'reserve:recorded']);
    expect(payments.chargesForKey('charge:ia-late-charge')).toBe(1);
    expect(email.sentForReference('receipt:ia-late-charge')).toBe(0);
  });
});
