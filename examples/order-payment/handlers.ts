import { found, notFound, type WorkflowRegistration } from 'ledgerflow/runtime';
import { sql } from 'kysely';
import { orderPaymentV1Handlers } from '../../generated/contracts/order-payment.v1.js';
import { orderPaymentHandlers, type OrderPaymentHandlers } from '../../generated/contracts/order-payment.v2.js';
import type { EmailGateway } from '../fakes/email-provider.js';
import type { PaymentGateway } from '../fakes/payment-provider.js';
import type { AppDatabase } from '../migrations/app-database.js';
import type { orderPaymentV1 } from './order-payment.v1.workflow.js';
import type { orderPayment } from './order-payment.workflow.js';

export interface OrderPaymentServices {
  readonly payments: PaymentGateway;
  readonly email: EmailGateway;
}

// #region order-payment-handlers
/**
 * `order-payment` bound to its handlers, ready for a worker: v2, and v1 for the runs started on
 * it (its steps are the same, so the same handlers serve both). The object literal is checked
 * against the generated contract: drop `reconcile` from `sendReceipt`, or return a plain object
 * from `recordPayment`, and this stops compiling.
 */
export function orderPaymentRegistrations(
  services: OrderPaymentServices,
): readonly [WorkflowRegistration<typeof orderPayment>, WorkflowRegistration<typeof orderPaymentV1>] {
  const handlers = {
    priceOrder: ({ input }) => ({
      amountCents: input.lines.reduce((sum, line) => sum + line.quantity * line.unitPriceCents, 0),
      itemCount: input.lines.reduce((sum, line) => sum + line.quantity, 0),
    }),

    chargeCard: {
      // The provider dedupes by Idempotency-Key, so after a crash the runtime may call this
      // again with the same key and gets the first charge back: no reconcile needed.
      async perform({ key, input, steps }) {
        const charge = await services.payments.charge(
          {
            reference: input.orderId,
            amountCents: steps.priceOrder.amountCents,
            currency: input.currency,
            customerId: input.customerId,
          },
          { idempotencyKey: key },
        );
        return { chargeId: charge.id, amountCents: charge.amountCents };
      },
    },

    // Runs inside the run's fenced transaction: these writes, the ledger row and the step
    // transition commit together or not at all.
    async recordPayment(ctx) {
      const { input, steps, tx } = ctx;
      const paymentId = `pay_${input.orderId}`;
      await tx
        .insertInto('shop.payment')
        .values({
          id: paymentId,
          order_id: input.orderId,
          charge_id: steps.chargeCard.chargeId,
          amount_cents: steps.chargeCard.amountCents,
          currency: input.currency,
        })
        .execute();
      await tx
        .insertInto('shop.revenue')
        .values({ currency: input.currency, total_cents: steps.chargeCard.amountCents, payments: 1 })
        .onConflict((oc) =>
          oc.column('currency').doUpdateSet({
            total_cents: sql`shop.revenue.total_cents + excluded.total_cents`,
            payments: sql`shop.revenue.payments + 1`,
          }),
        )
        .execute();
      return ctx.record({ paymentId });
    },

    // #region send-receipt
    sendReceipt: {
      // The email API does not dedupe. The key travels with the message as its reference,
      // which is what reconcile looks up after a crash.
      async perform({ key, input, steps }) {
        const sent = await services.email.send({
          to: input.email,
          subject: `Receipt for order ${input.orderId}`,
          body: `We charged ${(steps.chargeCard.amountCents / 100).toFixed(2)} ${input.currency.toUpperCase()} (${steps.chargeCard.chargeId}).`,
          reference: key,
        });
        return { messageId: sent.messageId };
      },
      async reconcile({ key }) {
        const [first] = await services.email.findByReference(key);
        return first === undefined ? notFound() : found({ messageId: first.messageId });
      },
    },
    // #endregion send-receipt
  } satisfies OrderPaymentHandlers<AppDatabase>;
  return [orderPaymentHandlers<AppDatabase>(handlers), orderPaymentV1Handlers<AppDatabase>(handlers)];
}
// #endregion order-payment-handlers
