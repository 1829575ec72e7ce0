import { queue } from 'ledgerflow/dsl';

export const emailQueue = queue('email', { concurrency: 5 });
export const tenantRuns = queue('tenant-runs', { partition: { concurrency: 1 } });
export const notAQueue = { name: 'fake', limits: {} };
export const keys = { byTenant: ({ input }: { input: { tenantId: string } }) => input.tenantId };
