import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULTS_ENV, parseFaultLogLine, type FaultSpec } from 'ledgerflow/testing';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { startFakeServer } from '../../examples/fakes/fake-server.js';
import type { RunningServer } from '../../examples/fakes/json-http.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { runCrashWorker as runWorkerProcess } from './fixtures/crash-worker-process.js';
import { startTestRun, runState } from './fixtures/run-helpers.js';
import { ALL_TEST_WORKFLOWS, charge, receipt } from './fixtures/test-workflows.js';

const LEASE_MS = 1_000;

describe('external step crash window: worker process SIGKILLed after perform [pg]', () => {
  let store: TestStore;
  let server: RunningServer;
  const payments = new FakePaymentProvider();
  const email = new FakeEmailProvider();

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, ALL_TEST_WORKFLOWS);
    server = await startFakeServer({ payments, email });
  });
  afterAll(async () => {
    await server.close();
    await store.close();
  });

  const killAfterPerform: FaultSpec = {
    seed: 20_261_129,
    points: { 'after-perform': { probability: 1, actions: ['kill'], times: 1 } },
  };

  it.each([
    ['charge', 'a provider that dedupes by key: the restarted worker performs again with the same key'],
    ['receipt', 'a provider that does not dedupe: the restarted worker waits, then reconciles by lookup'],
  ] as const)('%s — %s; one application per key and the ledger matches the provider', async (which, _how) => {
    const orders = [1, 2, 3].map((i) => `crash-${which}-${i}`);
    const ids = await Promise.all(
      orders.map((orderId) =>
        which === 'charge'
          ? startTestRun(store, charge, { orderId, amountCents: 1_000 })
          : startTestRun(store, receipt, { orderId, email: `${orderId}@example.com` }),
      ),
    );
    // Concurrency 1 in the crashing process: exactly one run is between perform and its result commit.
    const env = {
      DATABASE_URL: store.url!,
      FAKES_URL: server.url,
      CRASH_WORKFLOW: which,
      LEASE_MS: String(LEASE_MS),
      CONCURRENCY: '1',
    };
    const applied = (orderId: string): number =>
      which === 'charge' ? payments.chargesForKey(`charge:${orderId}`) : email.sentForReference(`receipt:${orderId}`);

    const crashed = await runWorkerProcess({ ...env, [FAULTS_ENV]: JSON.stringify(killAfterPerform) });
    const firing = crashed.stderr
      .split('\n')
      .map(parseFaultLogLine)
      .find((f) => f !== undefined);
    expect(crashed.signal, `worker exited ${crashed.code}\n${crashed.stderr}`).toBe('SIGKILL');
    expect(firing).toEqual({ point: 'after-perform', action: 'kill', seed: killAfterPerform.seed, firing: 1 });

    // The crash left exactly one effect applied at the provider with only an intent in the ledger.
    const afterCrash = await Promise.all(ids.map((id) => runState(store, id)));
    const open = afterCrash.flatMap((s) => s.effects).filter((e) => e.status === 'intent');
    expect(open).toHaveLength(1);
    expect(orders.reduce((sum, o) => sum + applied(o), 0)).toBe(1);

    const restarted = await runWorkerProcess(env);
    expect(restarted.code, restarted.stderr).toBe(0);

    for (const [i, id] of ids.entries()) {
      const orderId = orders[i]!;
      const { run, effects } = await runState(store, id);
      expect(run.status).toBe('completed');
      expect(applied(orderId)).toBe(1);
      expect(effects).toHaveLength(1);
      expect(effects[0]!.status).toBe('recorded');
      const providerRecord =
        which === 'charge'
          ? { chargeId: payments.charges().find((c) => c.idempotencyKey === `charge:${orderId}`)!.id }
          : { messageId: email.messages().find((m) => m.reference === `receipt:${orderId}`)!.messageId };
      expect(effects[0]!.effect).toEqual(providerRecord);
    }
    const crashedRun = afterCrash.find((s) => s.effects.some((e) => e.status === 'intent'))!;
    const { effects } = await runState(store, crashedRun.run.id);
    expect(effects[0]!.resolution ?? '').toMatch(which === 'charge' ? /^$/ : /found by reconcile/);
  });
});
