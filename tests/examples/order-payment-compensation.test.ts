import { beforeAll, expect, it } from 'vitest';
import { createClient, createWorker, migrate, NotAppliedError, type WorkflowRegistration } from 'ledgerflow/runtime';
import { demoOrders } from '../../examples/demo/demo-orders.js';
import { FakeEmailProvider, type EmailGateway } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider, type PaymentGateway, type RefundGateway } from '../../examples/fakes/payment-provider.js';
import type { AppDatabase } from '../../examples/migrations/app-database.js';
import { orderPaymentRegistrations } from '../../examples/order-payment/handlers.js';
import { orderPayment } from '../../examples/order-payment/order-payment.workflow.js';
import { describeStores } from '../support/describe-stores.js';
import type { TestStore } from '../support/test-stores.js';

const SOURCES = ['generated/migrations', 'examples/migrations'];

async function drain(store: TestStore, workflows: readonly WorkflowRegistration[]): Promise<void> {
  const worker = createWorker({ store, workflows, pollIntervalMs: 20, reconcileIntervalMs: 0 });
  try {
    await worker.drain({ timeoutMs: 30_000 });
  } finally {
    await worker.stop();
  }
}

/** The order-payment example (v3) undoing what it did when it cannot finish: its compensations refundCharge and voidPayment. */
describeStores('order-payment compensations', (getStore) => {
  beforeAll(async () => {
    await migrate(getStore(), { sources: SOURCES });
  });

  it('an order cancelled while its card was charged: recordPayment refuses it, the run ends compensated and the charge is refunded once', async () => {
    const store = getStore();
    const db = store.db.withTables<AppDatabase>();
    const provider = new FakePaymentProvider();
    // The customer withdraws the order while the provider is charging the card.
    const payments: PaymentGateway & RefundGateway = {
      async charge(request, options) {
        const charge = await provider.charge(request, options);
        await db
          .insertInto('shop.order_cancellation')
          .values({ order_id: request.reference, reason: 'withdrawn by the customer' })
          .execute();
        return charge;
      },
      findCharge: (key) => provider.findCharge(key),
      refund: (reference, options) => provider.refund(reference, options),
    };
    const email = new FakeEmailProvider();
    const client = createClient({ store });
    const [order] = demoOrders('cancelled', 1);
    const { runId } = await client.start(orderPayment, order!, { dedupeKey: order!.orderId });

    await drain(store, orderPaymentRegistrations({ payments, email }));

    const run = await client.getRun(runId);
    expect(run.status).toBe('compensated');
    expect(run.error).toMatchObject({
      message: expect.stringContaining(`order ${order!.orderId} was cancelled (withdrawn by the customer)`),
    });
    const [charge] = provider.charges();
    expect(provider.charges()).toHaveLength(1);
    const refunds = provider.refundsForReference(order!.orderId);
    expect(refunds).toEqual([
      {
        id: 're_000001',
        reference: order!.orderId,
        amountCents: charge!.amountCents,
        chargeIds: [charge!.id],
        idempotencyKey: `refund:${charge!.id}`,
      },
    ]);
    expect(run.effects.filter((e) => e.status === 'recorded').map((e) => [e.step_name, e.idempotency_key])).toEqual([
      ['chargeCard', `charge:${order!.orderId}`],
      ['refundCharge', `refund:${charge!.id}`],
    ]);
    expect(await db.selectFrom('shop.payment').selectAll().where('order_id', '=', order!.orderId).execute()).toEqual(
      [],
    );
    expect(email.sentForReference(`receipt:${order!.orderId}`)).toBe(0);

    // Nothing is left to do: another worker pass refunds nothing more.
    await drain(store, orderPaymentRegistrations({ payments, email }));
    expect(provider.refundsForReference(order!.orderId)).toHaveLength(1);
  });

  it('a receipt the email API refuses for good: voidPayment takes the payment back out of the shop tables, then refundCharge refunds', async () => {
    const store = getStore();
    const db = store.db.withTables<AppDatabase>();
    const payments = new FakePaymentProvider();
    const refusing: EmailGateway = {
      send: async () => {
        throw new NotAppliedError('mailbox does not exist');
      },
      findByReference: async () => [],
    };
    const client = createClient({ store });
    const [order] = demoOrders('bounced', 1);
    const revenueBefore = await db
      .selectFrom('shop.revenue')
      .selectAll()
      .where('currency', '=', order!.currency)
      .executeTakeFirst();
    const { runId } = await client.start(orderPayment, order!, { dedupeKey: order!.orderId });

    await drain(store, orderPaymentRegistrations({ payments, email: refusing }));

    const run = await client.getRun(runId);
    expect(run.status).toBe('compensated');
    const [charge] = payments.charges();
    expect(run.effects.filter((e) => e.status === 'recorded').map((e) => e.step_name)).toEqual([
      'chargeCard',
      'recordPayment',
      'voidPayment',
      'refundCharge',
    ]);
    expect(run.steps.find((s) => s.step_name === 'voidPayment')?.output).toEqual({ voided: true });
    expect(payments.refundsForReference(order!.orderId).map((r) => [r.amountCents, r.chargeIds])).toEqual([
      [charge!.amountCents, [charge!.id]],
    ]);
    expect(await db.selectFrom('shop.payment').selectAll().where('order_id', '=', order!.orderId).execute()).toEqual(
      [],
    );
    const revenueAfter = await db
      .selectFrom('shop.revenue')
      .selectAll()
      .where('currency', '=', order!.currency)
      .executeTakeFirst();
    expect([Number(revenueAfter?.total_cents ?? 0), revenueAfter?.payments ?? 0]).toEqual([
      Number(revenueBefore?.total_cents ?? 0),
      revenueBefore?.payments ?? 0,
    ]);
  });
});
