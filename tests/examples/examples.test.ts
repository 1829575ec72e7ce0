import { beforeAll, expect, it } from 'vitest';
import { createClient, createWorker, DuplicateRunError, migrate, type WorkflowRegistration } from 'ledgerflow/runtime';
import { sql } from 'kysely';
import { backfillBatch } from '../../examples/data-backfill/backfill-batch.workflow.js';
import { dataBackfill } from '../../examples/data-backfill/data-backfill.workflow.js';
import { backfillBatchRegistration, dataBackfillRegistration } from '../../examples/data-backfill/handlers.js';
import { demoOrders } from '../../examples/demo/demo-orders.js';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import type { AppDatabase } from '../../examples/migrations/app-database.js';
import { orderPaymentRegistrations } from '../../examples/order-payment/handlers.js';
import { orderPayment } from '../../examples/order-payment/order-payment.workflow.js';
import { userOnboardingRegistration } from '../../examples/user-onboarding/handlers.js';
import { userOnboarding } from '../../examples/user-onboarding/user-onboarding.workflow.js';
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

describeStores('example workflows', (getStore) => {
  beforeAll(async () => {
    await migrate(getStore(), { sources: SOURCES });
  });

  it('order-payment charges, records and receipts each order once, in the shop tables too', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const email = new FakeEmailProvider();
    const client = createClient({ store });
    const orders = demoOrders('op', 3);
    const runIds: string[] = [];
    for (const order of orders)
      runIds.push((await client.start(orderPayment, order, { dedupeKey: order.orderId })).runId);
    // Starting again is idempotent: no new run, no second charge later.
    expect((await client.start(orderPayment, orders[0]!, { dedupeKey: orders[0]!.orderId })).created).toBe(false);

    await drain(store, orderPaymentRegistrations({ payments, email }));

    for (const [i, runId] of runIds.entries()) {
      const run = await client.getRun(runId);
      expect(run.status).toBe('completed');
      const order = orders[i]!;
      const amount = order.lines.reduce((sum, l) => sum + l.quantity * l.unitPriceCents, 0);
      expect(run.steps.map((s) => s.step_name)).toEqual(['priceOrder', 'chargeCard', 'recordPayment', 'sendReceipt']);
      expect(run.effects.map((e) => [e.step_name, e.idempotency_key, e.status])).toEqual([
        ['chargeCard', `charge:${order.orderId}`, 'recorded'],
        ['recordPayment', `payment:${order.orderId}`, 'recorded'],
        ['sendReceipt', `receipt:${order.orderId}`, 'recorded'],
      ]);
      expect(payments.chargesForKey(`charge:${order.orderId}`)).toBe(1);
      expect(payments.charges().find((c) => c.reference === order.orderId)?.amountCents).toBe(amount);
      expect(email.sentForReference(`receipt:${order.orderId}`)).toBe(1);
    }
    const db = store.db.withTables<AppDatabase>();
    const paid = await db
      .selectFrom('shop.payment')
      .selectAll()
      .where(
        'order_id',
        'in',
        orders.map((o) => o.orderId),
      )
      .execute();
    expect(paid.map((p) => p.charge_id).sort()).toEqual(
      payments
        .charges()
        .map((c) => c.id)
        .sort(),
    );
    const revenue = await db
      .selectFrom('shop.revenue')
      .selectAll()
      .where('currency', '=', 'eur')
      .executeTakeFirstOrThrow();
    expect(Number(revenue.total_cents)).toBe(payments.charges().reduce((sum, c) => sum + c.amountCents, 0));
    expect(revenue.payments).toBe(3);
  });

  it("sendReceipt's reconcile finds a receipt by its key and reports a missing one as not found", async () => {
    const email = new FakeEmailProvider();
    const [registration] = orderPaymentRegistrations({ payments: new FakePaymentProvider(), email });
    const sendReceipt = registration.handlers['sendReceipt'] as {
      reconcile(ctx: { key: string }): Promise<{ status: string; output?: unknown }>;
    };
    await email.send({ to: 'a@example.com', subject: 'Receipt', body: '…', reference: 'receipt:o-7' });
    expect(await sendReceipt.reconcile({ key: 'receipt:o-7' })).toEqual({
      status: 'found',
      output: { messageId: 'msg_000001' },
    });
    expect(await sendReceipt.reconcile({ key: 'receipt:o-8' })).toEqual({ status: 'not_found' });
  });

  it('user-onboarding: one account per address; a repeated start is the same run; each sign-up run welcomes once', async () => {
    const store = getStore();
    const email = new FakeEmailProvider();
    const client = createClient({ store });
    const first = await client.start(
      userOnboarding,
      { email: 'Ada@Example.com', displayName: 'Ada' },
      { dedupeKey: 'signup:ada@example.com' },
    );
    const again = await client.start(
      userOnboarding,
      { email: 'Ada@Example.com', displayName: 'Ada' },
      { dedupeKey: 'signup:ada@example.com' },
    );
    expect(again).toEqual({ runId: first.runId, created: false });
    // A different sign-up run for an address that already has an account reuses the account.
    const other = await client.start(userOnboarding, { email: 'ada@example.com', displayName: 'Ada L.', plan: 'pro' });
    await drain(store, [userOnboardingRegistration({ email })]);

    const a = await client.getRun(first.runId);
    const b = await client.getRun(other.runId);
    const accountA = a.steps.find((s) => s.step_name === 'createAccount')?.output as {
      customerId: string;
      created: boolean;
    };
    const accountB = b.steps.find((s) => s.step_name === 'createAccount')?.output as {
      customerId: string;
      created: boolean;
    };
    expect([accountA.created, accountB.created].sort()).toEqual([false, true]);
    expect(accountB.customerId).toBe(accountA.customerId);
    const rows = await store.db
      .withTables<AppDatabase>()
      .selectFrom('shop.customer')
      .selectAll()
      .where('email', '=', 'ada@example.com')
      .execute();
    expect(rows).toHaveLength(1);
    // Two sign-up runs, two welcomes: the ledger is per run and this email API does not dedupe.
    // Starting with the same dedupe key (as above) is what makes a repeated sign-up one run.
    expect(email.messages().map((m) => m.reference)).toEqual([
      `welcome:${accountA.customerId}`,
      `welcome:${accountA.customerId}`,
    ]);
  });

  it('data-backfill fans out one batch run per range, copies every row once, and starting the job again changes nothing', async () => {
    const store = getStore();
    const db = store.db.withTables<AppDatabase>();
    await sql`INSERT INTO legacy.account (id, email, balance_euros)
              SELECT g, ' User' || g || '@Example.COM ', g * 1.25 FROM generate_series(1, 250) AS g`.execute(db);
    const client = createClient({ store });
    const workflows = [dataBackfillRegistration(), backfillBatchRegistration()];

    const { runId } = await client.start(
      dataBackfill,
      { job: 'accounts', batchSize: 100 },
      { dedupeKey: 'backfill:accounts' },
    );
    await drain(store, workflows);
    // Started again (a deploy, a retried script): the same run, nothing new to copy.
    expect(
      await client.start(dataBackfill, { job: 'accounts', batchSize: 100 }, { dedupeKey: 'backfill:accounts' }),
    ).toEqual({
      runId,
      created: false,
    });
    await drain(store, workflows);

    const run = await client.getRun(runId);
    expect(run.status).toBe('completed');
    expect(run.output).toMatchObject({
      planBatches: {
        batches: [
          { fromId: 0, toId: 100 },
          { fromId: 100, toId: 200 },
          { fromId: 200, toId: 300 },
        ],
      },
      copyBatches: [{ copied: 99 }, { copied: 100 }, { copied: 51 }],
      total: { batches: 3, rowsCopied: 250 },
    });
    expect(run.children.map((c) => [c.workflowName, c.index, c.status])).toEqual([
      ['backfill-batch', 0, 'completed'],
      ['backfill-batch', 1, 'completed'],
      ['backfill-batch', 2, 'completed'],
    ]);
    const batches = await client.listRuns({ workflow: backfillBatch.name });
    expect(batches.map((r) => r.dedupe_key).sort()).toEqual(['accounts:0', 'accounts:100', 'accounts:200']);
    expect(batches.every((r) => r.parent_run_id === runId && r.status === 'completed')).toBe(true);

    const copied = await db.selectFrom('billing.account').selectAll().orderBy('id').execute();
    expect(copied).toHaveLength(250);
    expect(copied[0]).toEqual({ id: 1, email: 'user1@example.com', balance_cents: 125 });
    expect(await db.selectFrom('billing.backfill_progress').selectAll().execute()).toEqual([
      { job: 'accounts', rows_copied: 250, batches: 3 },
    ]);
    // Another batch size for a job that has begun would cut other ranges: refused, not copied twice.
    await expect(
      client.start(dataBackfill, { job: 'accounts', batchSize: 50 }, { dedupeKey: 'backfill:accounts' }),
    ).rejects.toThrow(DuplicateRunError);
  });
});
