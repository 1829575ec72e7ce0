import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { paymentSettled } from './payment-settled.js';

/**
 * An order paid on the provider's hosted checkout page: the shop learns of the payment only from
 * the provider's `payment.settled` webhook (see `webhook.ts`).
 *
 * - `settled` waits for that event, keyed by the order id, for at most 30 minutes; the window
 *   is fixed on database time when the run first gets there. Meanwhile the run holds no lease
 *   and no worker slot (`waiting`). On timeout its output says `timeout` — it does not throw.
 * - Paid: `recordPayment` writes the shop's tables, once (transactional).
 * - Not paid in time: `refundPayment` gives back whatever the customer may still have paid for
 *   the order — a late payment, or one whose webhook was lost — under one key, so a retry
 *   after a crash cannot refund twice. Each step runs on one branch only; the other is recorded
 *   as skipped, with no ledger row and `undefined` as its output.
 */
export const orderWebhook = workflow('order-webhook', {
  version: 1,
  input: z.object({
    orderId: z.string().min(1),
    customerId: z.string().min(1),
    currency: z.enum(['eur', 'usd', 'gbp']),
    amountCents: z.number().int().positive(),
  }),
})
  .waitFor('settled', {
    event: paymentSettled,
    match: ({ input }) => input.orderId,
    timeoutMs: 30 * 60_000,
  })
  .transactional('recordPayment', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input }) => `payment:${input.orderId}`,
    when: ({ steps }) => steps.settled.status === 'received',
  })
  .external('refundPayment', {
    output: z.object({ refundId: z.string(), amountCents: z.number().int().nonnegative() }),
    key: ({ input }) => `refund:${input.orderId}`,
    idempotentByKey: true,
    performTimeoutMs: 2_000,
    when: ({ steps }) => steps.settled.status === 'timeout',
  });
