import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

/**
 * Renews one period of a subscription: sleeps until the renewal date, then charges.
 *
 * The sleep is durable. Its wake-up time is written once, when the run first reaches the step,
 * and survives restarts and deploys; until then the run is `waiting`, holding no lease and no
 * worker slot, however many renewals are due next month. The charge key names the period, so
 * each period is charged once, and a retry after a crash sends the same key.
 */
export const subscriptionRenewal = workflow('subscription-renewal', {
  version: 1,
  input: z.object({
    subscriptionId: z.string().min(1),
    customerId: z.string().min(1),
    currency: z.enum(['eur', 'usd', 'gbp']),
    amountCents: z.number().int().positive(),
    /** When the new period starts, e.g. "2025-07-01T00:00:00Z". */
    renewsAt: z.iso.datetime(),
  }),
})
  .sleep('untilRenewal', { until: ({ input }) => input.renewsAt })
  .external('chargeRenewal', {
    output: z.object({ chargeId: z.string(), amountCents: z.number().int() }),
    key: ({ input }) => `renewal:${input.subscriptionId}:${input.renewsAt}`,
    request: ({ input }) => ({ amountCents: input.amountCents, currency: input.currency }),
    idempotentByKey: true,
    performTimeoutMs: 2_000,
    retry: { maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 2_000 },
  });
