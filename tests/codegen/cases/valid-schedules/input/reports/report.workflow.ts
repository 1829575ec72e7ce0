import { schedule, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const report = workflow('report', { version: 1, input: z.object({ night: z.iso.date(), region: z.string() }) })
  .step('total', { output: z.object({ cents: z.number().int() }) });

// Declared next to its workflow: read as well.
export const hourlyReport = schedule('hourly-report', {
  cron: '0 * * * *',
  workflow: report,
  input: ({ scheduledAt }) => ({ night: scheduledAt.slice(0, 10), region: 'eu' }),
});
