import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { emailQueue } from './email-queue.js';

// #region order-payment-workflow
/**
 * Takes an order from "placed" to "paid and receipted".
 *
 * - `priceOrder` only computes (a `step` may run more than once, so it must not write).
 * - `chargeCard` calls a Stripe-like provider that dedupes by idempotency key, so a crashed
 *   attempt is simply retried with the same key: the provider returns the first charge.
 * - `recordPayment` writes the shop's own tables in the same commit as the ledger row.
 * - `sendReceipt` calls an email API that does not dedupe: its handler must `reconcile`
 *   (look the receipt up by key) before the runtime will send again. Each attempt waits for a
 *   grant of the email queue (50 a second across all workers) — new in v2; v1 stays declared
 *   beside it (order-payment.v1.workflow.ts) for runs started before.
 */
export const orderPayment = workflow('order-payment', {
  version: 2,
  input: z.object({
    orderId: z.string().min(1),
    customerId: z.string().min(1),
    email: z.email(),
    currency: z.enum(['eur', 'usd', 'gbp']),
    lines: z
      .array(z.object({ sku: z.string(), quantity: z.number().int().positive(), unitPriceCents: z.number().int().positive() }))
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
  })
  .transactional('recordPayment', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input }) => `payment:${input.orderId}`,
  })
  .external('sendReceipt', {
    output: z.object({ messageId: z.string() }),
    key: ({ input }) => `receipt:${input.orderId}`,
    queue: { queue: emailQueue },
    performTimeoutMs: 2_000,
    retry: { maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 2_000 },
  });
// #endregion order-payment-workflow
