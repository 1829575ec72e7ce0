import { queue } from 'ledgerflow/dsl';

export const tenantRuns = queue('tenant-runs', { partition: { concurrency: 2 } });
export const emailQueue = queue('email', { concurrency: 5 });
export const smsQueue = queue('sms', { concurrency: 5 });
