import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { emailQueue } from './email-queue.js';

/**
 * order-payment v2: v3's steps (order-payment.workflow.ts), without the compensations that refund
 * the charge and void the payment when the run cannot finish. It stays declared, unchanged, while runs started on it may
 * still be in flight (see `ledgerflow versions`); once none is unfinished, delete this file and run
 * `npx ledgerflow codegen --retire order-payment@2`.
 */
export const orderPaymentV2 = workflow('order-payment', {
  version: 2,
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
