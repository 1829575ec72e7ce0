import { schedule } from 'ledgerflow/dsl';
import { revenueReport } from './revenue-report.workflow.js';

/**
 * `revenue-report` every night at 02:00, Berlin time (croner reads the cron in that zone, across
 * daylight-saving changes). Each tick starts one run, whichever worker gets there, with the tick
 * as the report's end. A night on which no worker was up is made up for by the latest missed
 * tick, once.
 */
export const nightlyRevenueReport = schedule('nightly-revenue-report', {
  cron: '0 2 * * *',
  timezone: 'Europe/Berlin',
  workflow: revenueReport,
  input: ({ scheduledAt }) => ({ until: scheduledAt }),
  catchUp: 'latest',
});
