import { found, NonRetryableError, notFound, type WorkflowRegistration } from 'ledgerflow/runtime';
import { sql } from 'kysely';
import { orderPaymentV1Handlers } from '../../generated/contracts/order-payment.v1.js';
import { orderPaymentV2Handlers } from '../../generated/contracts/order-payment.v2.js';
import { orderPaymentHandlers, type OrderPaymentHandlers } from '../../generated/contracts/order-payment.v3.js';
import type { EmailGateway } from '../fakes/email-provider.js';
import type { PaymentGateway, RefundGateway } from '../fakes/payment-provider.js';
import type { AppDatabase } from '../migrations/app-database.js';
import type { orderPaymentV1 } from './order-payment.v1.workflow.js';
import type { orderPaymentV2 } from './order-payment.v2.workflow.js';
import type { orderPayment } from './order-payment.workflow.js';

export interface OrderPaymentServices {
  readonly payments: PaymentGateway & RefundGateway;
  readonly email: EmailGateway;
}

/** The shop cancelled the order while its payment was under way: recording the payment would be wrong, retrying it too. */
export class OrderCancelledError extends NonRetryableError {
  override readonly name = 'OrderCancelledError';
}

// #region order-payment-handlers
/**
 * `order-payment` bound to its handlers, ready for a worker: v3, and v2 and v1 for the runs
 * started on them (their steps are v3's, so the same handlers serve all three; they have no
 * compensations to call). The object literal is checked against the generated contract: drop
 * `reconcile` from `sendReceipt`, the `refundCharge` compensation, or return a plain object from
 * `recordPayment`, and this stops compiling.
 */
export function orderPaymentRegistrations(
  services: OrderPaymentServices,
): readonly [
  WorkflowRegistration<typeof orderPayment>,
  WorkflowRegistration<typeof orderPaymentV2>,
  WorkflowRegistration<typeof orderPaymentV1>,
] {
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

    // #region refund-charge-handler
    // The compensation of chargeCard: runs once, only if the charge is recorded, when the run
    // cannot finish. The provider dedupes refunds by Idempotency-Key as it does charges.
    refundCharge: {
      async perform({ key, input }) {
        const refund = await services.payments.refund(input.orderId, { idempotencyKey: key });
        return { refundId: refund.id, amountCents: refund.amountCents };
      },
    },
    // #endregion refund-charge-handler

    // Runs inside the run's fenced transaction: these writes, the ledger row and the step
    // transition commit together or not at all. A cancelled order fails the run for good, and
    // the run's compensations (refundCharge) give the charge back.
    async recordPayment(ctx) {
      const { input, steps, tx } = ctx;
      const cancelled = await tx
        .selectFrom('shop.order_cancellation')
        .select('reason')
        .where('order_id', '=', input.orderId)
        .executeTakeFirst();
      if (cancelled !== undefined)
        throw new OrderCancelledError(
          `order ${input.orderId} was cancelled (${cancelled.reason}); not recording its payment`,
        );
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

    // The compensation of recordPayment (when a later step fails for good, or the run is
    // cancelled with compensate): takes the payment back out of the shop's tables, in one commit
    // with its ledger row.
    async voidPayment(ctx) {
      const { input, steps, tx } = ctx;
      const deleted = await tx
        .deleteFrom('shop.payment')
        .where('id', '=', steps.recordPayment.paymentId)
        .executeTakeFirst();
      if (deleted.numDeletedRows > 0n) {
        await tx
          .updateTable('shop.revenue')
          .set({
            total_cents: sql`total_cents - ${steps.chargeCard.amountCents}`,
            payments: sql`payments - 1`,
          })
          .where('currency', '=', input.currency)
          .execute();
      }
      return ctx.record({ voided: deleted.numDeletedRows > 0n });
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
  return [
    orderPaymentHandlers<AppDatabase>(handlers),
    orderPaymentV2Handlers<AppDatabase>(handlers),
    orderPaymentV1Handlers<AppDatabase>(handlers),
  ];
}
// #endregion order-payment-handlers
