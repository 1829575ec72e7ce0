import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { emailQueue } from './email-queue.js';

// #region order-payment-workflow
/**
 * Takes an order from "placed" to "paid and receipted".
 *
 * - `priceOrder` only computes (a `step` may run more than once, so it must not write).
 * - `chargeCard` calls a Stripe-like provider that dedupes by idempotency key, so a crashed
 *   attempt is simply retried with the same key: the provider returns the first charge. If the
 *   run cannot finish (the shop cancelled the order meanwhile, so `recordPayment` refuses it), its
 *   compensation `refundCharge` gives the money back — once, under its own key — new in v3.
 * - `recordPayment` writes the shop's own tables in the same commit as the ledger row; its
 *   compensation `voidPayment` takes the payment back out of them the same way.
 * - `sendReceipt` calls an email API that does not dedupe: its handler must `reconcile`
 *   (look the receipt up by key) before the runtime will send again. Each attempt waits for a
 *   grant of the email queue (50 a second across all workers). v2 (without compensations) and v1
 *   (without the queue) stay declared beside it for runs started before.
 */
export const orderPayment = workflow('order-payment', {
  version: 3,
  input: z.object({
    orderId: z.string().min(1),
    customerId: z.string().min(1),
    email: z.email(),
    currency: z.enum(['eur', 'usd', 'gbp']),
    lines: z
      .array(
        z.object({
          sku: z.string(),
          quantity: z.number().int().positive(),
          unitPriceCents: z.number().int().positive(),
        }),
      )
      .min(1),
  }),
})
  .step('priceOrder', {
    output: z.object({ amountCents: z.number().int().positive(), itemCount: z.number().int().positive() }),
  })
  .external('chargeCard', {
    output: z.object({ chargeId: z.string(), amountCents: z.number().int() }),
    key: ({ input }) => `charge:${input.orderId}`,
    request: ({ input, steps }) => ({ amountCents: steps.priceOrder.amountCents, currency: input.currency }),
    idempotentByKey: true,
    performTimeoutMs: 2_000,
    retry: { maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 2_000 },
    // #region refund-charge
    compensate: {
      name: 'refundCharge',
      // Its own key (never the charge's): the provider dedupes refunds by it as well.
      key: ({ steps }) => `refund:${steps.chargeCard.chargeId}`,
      output: z.object({ refundId: z.string(), amountCents: z.number().int() }),
      idempotentByKey: true,
      performTimeoutMs: 2_000,
      retry: { maxAttempts: 10, initialDelayMs: 100, maxDelayMs: 5_000 },
    },
    // #endregion refund-charge
  })
  .transactional('recordPayment', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input }) => `payment:${input.orderId}`,
    compensate: {
      name: 'voidPayment',
      key: ({ steps }) => `void:${steps.recordPayment.paymentId}`,
      output: z.object({ voided: z.boolean() }),
    },
  })
  .external('sendReceipt', {
    output: z.object({ messageId: z.string() }),
    key: ({ input }) => `receipt:${input.orderId}`,
    queue: { queue: emailQueue },
    performTimeoutMs: 2_000,
    retry: { maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 2_000 },
  });
// #endregion order-payment-workflow
