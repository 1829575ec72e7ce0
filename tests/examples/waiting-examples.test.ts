import { sql } from 'kysely';
import { createClient, createWorker, migrate, type Client, type Worker } from 'ledgerflow/runtime';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import type { AppDatabase } from '../../examples/migrations/app-database.js';
import { orderWebhookRegistration } from '../../examples/order-webhook/handlers.js';
import { orderWebhook } from '../../examples/order-webhook/order-webhook.workflow.js';
import { receivePaymentWebhook, type PaymentWebhookBody } from '../../examples/order-webhook/webhook.js';
import { subscriptionRenewalRegistration } from '../../examples/subscription-renewal/handlers.js';
import { subscriptionRenewal } from '../../examples/subscription-renewal/subscription-renewal.workflow.js';
import { waitUntil } from '../runtime/fixtures/run-helpers.js';
import { describeStores } from '../support/describe-stores.js';
import type { TestStore } from '../support/test-stores.js';

/**
 * The examples that wait — `order-webhook` (an event with a timeout, and a branch per outcome)
 * and `subscription-renewal` (a durable sleep) — run on a real store by a real worker, their
 * outcomes checked against the fake provider's own counters.
 */
describeStores('example workflows that wait', (getStore) => {
  const payments = new FakePaymentProvider();
  let client: Client;
  let worker: Worker;
  beforeAll(async () => {
    await migrate(getStore(), { sources: ['generated/migrations', 'examples/migrations'] });
    client = createClient({ store: getStore() });
    worker = createWorker({
      store: getStore(),
      workflows: [orderWebhookRegistration({ payments }), subscriptionRenewalRegistration({ payments })],
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    await worker.start();
  });
  afterAll(async () => {
    await worker.stop();
  });

  /** The customer pays on the provider's checkout page; the provider then sends its webhook (or loses it). */
  async function customerPays(orderId: string, amountCents: number): Promise<PaymentWebhookBody> {
    const charge = await payments.charge(
      { reference: orderId, amountCents, currency: 'eur', customerId: 'cus_1' },
      { idempotencyKey: `checkout:${orderId}` },
    );
    return {
      eventId: `evt_${charge.id}`,
      type: 'charge.succeeded',
      data: { reference: orderId, chargeId: charge.id, amountCents },
    };
  }

  const waiting = (runId: string) =>
    waitUntil(`run ${runId} to wait`, async () => {
      const run = await client.getRun(runId);
      return run.status === 'waiting' ? run : undefined;
    });

  it('order-webhook: the payment webhook, before or after the run waits, is recorded once and nothing is refunded', async () => {
    // Paid, and the webhook delivered, before the shop even started the order's run: the event is kept.
    const early = await customerPays('ow-early', 1500);
    expect(await receivePaymentWebhook(client, early)).toMatchObject({ created: true, woke: 0 });
    const a = await client.start(orderWebhook, {
      orderId: 'ow-early',
      customerId: 'cus_1',
      currency: 'eur',
      amountCents: 1500,
    });

    const b = await client.start(orderWebhook, {
      orderId: 'ow-late',
      customerId: 'cus_1',
      currency: 'eur',
      amountCents: 2500,
    });
    const parked = await waiting(b.runId);
    expect(parked.lease_owner).toBeNull();
    expect(parked.waiting_for).toMatchObject({
      kind: 'event',
      step: 'settled',
      event: 'payment.settled',
      key: 'ow-late',
    });
    const late = await customerPays('ow-late', 2500);
    const delivered = await receivePaymentWebhook(client, late);
    expect(delivered).toMatchObject({ created: true, woke: 1 });
    // The provider retries a webhook it got no 2xx for: stored once, taken once.
    expect(await receivePaymentWebhook(client, late)).toEqual({ eventId: delivered!.eventId, created: false, woke: 0 });

    for (const [runId, body] of [
      [a.runId, early],
      [b.runId, late],
    ] as const) {
      const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
      expect(run.status).toBe('completed');
      expect(run.output).toEqual({
        settled: expect.objectContaining({
          status: 'received',
          payload: { orderId: body.data.reference, chargeId: body.data.chargeId, amountCents: body.data.amountCents },
        }),
        recordPayment: { paymentId: `pay_${body.data.reference}` },
      });
      expect(run.steps.map((s) => [s.step_name, s.skipped])).toEqual([
        ['settled', false],
        ['recordPayment', false],
        ['refundPayment', true],
      ]);
      expect(run.effects.map((e) => [e.idempotency_key, e.status])).toEqual([
        [`payment:${body.data.reference}`, 'recorded'],
      ]);
      expect(payments.refundsForReference(body.data.reference)).toEqual([]);
    }
    const paid = await getStore()
      .db.withTables<AppDatabase>()
      .selectFrom('shop.payment')
      .select(['order_id', 'charge_id', 'amount_cents'])
      .where('order_id', 'in', ['ow-early', 'ow-late'])
      .orderBy('order_id')
      .execute();
    expect(paid).toEqual([
      { order_id: 'ow-early', charge_id: early.data.chargeId, amount_cents: 1500 },
      { order_id: 'ow-late', charge_id: late.data.chargeId, amount_cents: 2500 },
    ]);
  });

  it('order-webhook: no webhook within the window → timeout → the late payment is refunded, once', async () => {
    const { runId } = await client.start(orderWebhook, {
      orderId: 'ow-lost',
      customerId: 'cus_1',
      currency: 'eur',
      amountCents: 900,
    });
    await waiting(runId);
    // The customer pays, but the provider's webhook never reaches the shop.
    const lost = await customerPays('ow-lost', 900);
    await elapseWindow(getStore(), runId, 'settled');

    const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(run.status).toBe('completed');
    const refunds = payments.refundsForReference('ow-lost');
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({
      amountCents: 900,
      chargeIds: [lost.data.chargeId],
      idempotencyKey: 'refund:ow-lost',
    });
    expect(run.output).toEqual({
      settled: { status: 'timeout', timedOutAt: expect.any(String) },
      refundPayment: { refundId: refunds[0]!.id, amountCents: 900 },
    });
    expect(run.steps.map((s) => [s.step_name, s.skipped])).toEqual([
      ['settled', false],
      ['recordPayment', true],
      ['refundPayment', false],
    ]);
    expect(run.effects.map((e) => [e.idempotency_key, e.status])).toEqual([['refund:ow-lost', 'recorded']]);
    const recorded = await getStore()
      .db.withTables<AppDatabase>()
      .selectFrom('shop.payment')
      .select('id')
      .where('order_id', '=', 'ow-lost')
      .execute();
    expect(recorded).toEqual([]);

    // The webhook turns up after all: stored, but no run waits for it any more.
    expect(await receivePaymentWebhook(client, lost)).toMatchObject({ created: true, woke: 0 });
    expect((await client.getRun(runId)).status).toBe('completed');
    expect(payments.refundsForReference('ow-lost')).toHaveLength(1);
  });

  it('subscription-renewal: sleeps until the renewal date holding no lease, then charges the period once', async () => {
    const renewsAt = new Date(Date.now() + 1_500).toISOString();
    const input = {
      subscriptionId: 'sub-1',
      customerId: 'cus_1',
      currency: 'eur',
      amountCents: 1900,
      renewsAt,
    } as const;
    const { runId } = await client.start(subscriptionRenewal, input, { dedupeKey: `renewal:sub-1:${renewsAt}` });

    const asleep = await waiting(runId);
    expect(asleep.lease_owner).toBeNull();
    expect(asleep.waiting_for).toEqual({ kind: 'sleep', step: 'untilRenewal', until: renewsAt });
    expect(asleep.waits.map((w) => w.until?.toISOString())).toEqual([renewsAt]);
    expect(payments.chargesForReference('sub-1')).toBe(0);
    // Starting the same period again is the same run.
    expect(await client.start(subscriptionRenewal, input, { dedupeKey: `renewal:sub-1:${renewsAt}` })).toEqual({
      runId,
      created: false,
    });

    const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(run.status).toBe('completed');
    expect(run.finished_at!.getTime()).toBeGreaterThanOrEqual(Date.parse(renewsAt));
    const [charge] = payments.charges().filter((c) => c.reference === 'sub-1');
    expect(run.output).toEqual({
      untilRenewal: { until: renewsAt },
      chargeRenewal: { chargeId: charge!.id, amountCents: 1900 },
    });
    expect(payments.chargesForKey(`renewal:sub-1:${renewsAt}`)).toBe(1);
    expect(payments.chargesForReference('sub-1')).toBe(1);
  });
});

/**
 * What the database holds once a wait's window has passed, without sitting through it: the
 * deadline the run fixed when it reached the step, and the run's wake-up time, moved to now.
 * The runtime reads time only from the database, so these two rows are all it sees.
 */
async function elapseWindow(store: TestStore, runId: string, step: string): Promise<void> {
  await store.db.transaction().execute(async (trx) => {
    await sql`UPDATE ledgerflow.step_wait SET until = statement_timestamp()
               WHERE run_id = ${runId} AND step_name = ${step} AND resolved_at IS NULL`.execute(trx);
    await sql`UPDATE ledgerflow.workflow_run SET run_after = statement_timestamp()
               WHERE id = ${runId} AND status = 'waiting'`.execute(trx);
  });
}
