import { queue } from 'ledgerflow/dsl';

const PER_SECOND = 1_000;

/** One onboarding per tenant at a time. */
export const tenantRuns = queue('tenant-runs', { concurrency: 50, partition: { concurrency: 1 } });

/** The email provider takes 10 requests a second, 2 a second per recipient domain. */
export const emailQueue = queue('email', {
  rateLimit: { limit: 10, periodMs: PER_SECOND },
  partition: { rateLimit: { limit: 2, periodMs: PER_SECOND } },
});
