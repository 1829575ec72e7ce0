import { sql } from 'kysely';
import { NonRetryableError, type WorkflowRegistration } from 'ledgerflow/runtime';
import { orderWebhookHandlers } from '../../generated/contracts/order-webhook.v1.js';
import type { RefundGateway } from '../fakes/payment-provider.js';
import type { AppDatabase } from '../migrations/app-database.js';
import type { orderWebhook } from './order-webhook.workflow.js';

export interface OrderWebhookServices {
  readonly payments: RefundGateway;
}

/**
 * `order-webhook` bound to its handlers. `settled` is a built-in step: it has no handler, the
 * worker waits for the event itself.
 */
export function orderWebhookRegistration(services: OrderWebhookServices): WorkflowRegistration<typeof orderWebhook> {
  return orderWebhookHandlers<AppDatabase>({
    async recordPayment(ctx) {
      const { input, steps, tx } = ctx;
      // The condition ran this step only for a received event; the type cannot know that.
      if (steps.settled.status !== 'received') throw new NonRetryableError('recordPayment needs a settled payment');
      const { chargeId, amountCents } = steps.settled.payload;
      const paymentId = `pay_${input.orderId}`;
      await tx
        .insertInto('shop.payment')
        .values({
          id: paymentId,
          order_id: input.orderId,
          charge_id: chargeId,
          amount_cents: amountCents,
          currency: input.currency,
        })
        .execute();
      await tx
        .insertInto('shop.revenue')
        .values({ currency: input.currency, total_cents: amountCents, payments: 1 })
        .onConflict((oc) =>
          oc.column('currency').doUpdateSet({
            total_cents: sql`shop.revenue.total_cents + excluded.total_cents`,
            payments: sql`shop.revenue.payments + 1`,
          }),
        )
        .execute();
      return ctx.record({ paymentId });
    },

    refundPayment: {
      // The provider dedupes refunds by key: after a crash the same key returns the first refund.
      async perform({ key, input }) {
        const refund = await services.payments.refund(input.orderId, { idempotencyKey: key });
        return { refundId: refund.id, amountCents: refund.amountCents };
      },
    },
  });
}
