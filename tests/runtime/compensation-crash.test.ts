import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULTS_ENV, parseFaultLogLine, type FaultPointName, type FaultSpec } from 'ledgerflow/testing';
import { startFakeServer } from '../../examples/fakes/fake-server.js';
import type { RunningServer } from '../../examples/fakes/json-http.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { mulberry32 } from '../../runtime/faults/mulberry32.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { FakeRefundDesk, refundDeskRoutes } from '../support/refund-desk.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { chargeThenRefund } from './fixtures/compensation-crash-workflow.js';
import { runCrashWorker } from './fixtures/crash-worker-process.js';
import { runState, startTestRun } from './fixtures/run-helpers.js';

/*
 * Issue 17: a worker SIGKILLed inside a compensation — before, during and after the refund
 * reaches the provider — is taken over by another worker after its lease expires, and the
 * charge is refunded exactly once, counted by a refund desk in this process that does not dedupe
 * (tests/support/refund-desk.ts). PostgreSQL only: the worker processes share the database.
 */

const LEASE_MS = 1_000;
const PROBABILITY = 0.5;

/**
 * A seed whose fault decisions skip the first time the point is reached and fire the second.
 * The crashing worker drives one run: the point is reached by `charge` first (its external
 * executor), then by `refund` — so the kill lands inside the compensation. A fault point draws
 * one number per decision while it has not fired (runtime/faults/fault-points.ts).
 */
function seedFiringSecond(): number {
  for (let seed = 1; ; seed++) {
    const random = mulberry32(seed);
    if (random() >= PROBABILITY && random() < PROBABILITY) return seed;
  }
}

describe('compensation crash window: worker process SIGKILLed inside the refund [pg]', () => {
  let store: TestStore;
  let server: RunningServer;
  const payments = new FakePaymentProvider();
  const desk = new FakeRefundDesk();

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [chargeThenRefund]);
    server = await startFakeServer({ payments }, [refundDeskRoutes(desk)]);
  });
  afterAll(async () => {
    await server?.close();
    await store?.close();
  });

  it.each([
    ['after-intent-commit', 0, 'killed before the refund request: the next worker finds nothing at lookup and refunds'],
    [
      'after-perform',
      1,
      'killed after the desk applied the refund: the next worker finds it by key, refunds nothing more',
    ],
    ['before-result-commit', 1, 'killed before the result commit: the same'],
  ] as const)('%s — %s', async (point: FaultPointName, refundsAtCrash, _how) => {
    const orderId = `comp-crash-${point}`;
    const runId = await startTestRun(store, chargeThenRefund, { orderId, amountCents: 700 });
    const env = {
      DATABASE_URL: store.url!,
      FAKES_URL: server.url,
      CRASH_WORKFLOW: 'refund',
      LEASE_MS: String(LEASE_MS),
      CONCURRENCY: '1',
    };
    const spec: FaultSpec = {
      seed: seedFiringSecond(),
      points: { [point]: { probability: PROBABILITY, actions: ['kill'], times: 1 } },
    };

    const crashed = await runCrashWorker({ ...env, [FAULTS_ENV]: JSON.stringify(spec) });
    expect(crashed.signal, `worker exited ${crashed.code}\n${crashed.stderr}`).toBe('SIGKILL');
    const firing = crashed.stderr
      .split('\n')
      .map(parseFaultLogLine)
      .find((f) => f !== undefined);
    expect(firing).toEqual({ point, action: 'kill', seed: spec.seed, firing: 1 });

    // The kill came inside the compensation: charge recorded, the refund's intent open, the run
    // still held (running, compensating) by the dead worker.
    const chargeKey = `charge:${orderId}`;
    const chargeId = payments.charges().find((c) => c.idempotencyKey === chargeKey)!.id;
    const atCrash = await runState(store, runId);
    expect(atCrash.run).toMatchObject({ status: 'running', compensation: 'failure' });
    expect(atCrash.effects.map((e) => `${e.step_name}:${e.status}`).sort()).toEqual([
      'charge:recorded',
      'refund:intent',
    ]);
    expect(desk.refundsByCharge().get(chargeId) ?? 0).toBe(refundsAtCrash);

    const restarted = await runCrashWorker(env);
    expect(restarted.code, restarted.stderr).toBe(0);

    const { run, effects } = await runState(store, runId);
    expect(run.status).toBe('compensated');
    expect(run.error).toMatchObject({ step: 'confirm', message: `order ${orderId} cannot be confirmed` });
    expect(payments.chargesForKey(chargeKey)).toBe(1);
    expect(desk.refundsByCharge().get(chargeId)).toBe(1);
    const refund = desk.refunds().find((r) => r.chargeId === chargeId)!;
    const refundRow = effects.find((e) => e.step_name === 'refund')!;
    expect(refundRow).toMatchObject({
      status: 'recorded',
      idempotency_key: `refund:${chargeId}`,
      effect: { refundId: refund.refundId },
    });
    expect(refundRow.resolution).toMatch(
      refundsAtCrash === 1 ? /^found by reconcile/ : /^not_found by reconcile.*performing again with the same key/,
    );
  });
});
