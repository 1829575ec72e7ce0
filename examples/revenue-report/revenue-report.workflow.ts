import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

/**
 * The shop's takings over the 24 hours before `until`, per currency: one read-only step, whose
 * checkpointed output is the report (`ledgerflow run <id>` shows it). Started every night by the
 * `nightly-revenue-report` schedule, with `until` = the tick, so a run that starts late or for a
 * missed night still reports the day it is for.
 */
export const revenueReport = workflow('revenue-report', {
  version: 1,
  input: z.object({ until: z.iso.datetime() }),
}).step('sumPayments', {
  output: z.object({
    from: z.string(),
    until: z.string(),
    currencies: z.array(z.object({ currency: z.string(), payments: z.number().int(), cents: z.number().int() })),
  }),
});
