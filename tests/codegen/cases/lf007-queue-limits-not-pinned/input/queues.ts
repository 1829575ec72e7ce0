import { queue } from 'ledgerflow/dsl';

// Both limits were tuned since v1 was generated (concurrency 1 per tenant, 5 emails at once):
// operational settings, not part of any workflow version.
export const tenantRuns = queue('tenant-runs', { concurrency: 100, partition: { concurrency: 2 } });
export const emailQueue = queue('email', { concurrency: 20, rateLimit: { limit: 50, periodMs: 1_000 } });
