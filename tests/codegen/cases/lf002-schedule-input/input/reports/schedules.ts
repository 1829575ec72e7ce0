import { schedule } from 'ledgerflow/dsl';
import { report } from './report.workflow.js';

let region = 'eu';

export function moveTo(next: string): void {
  region = next;
}

export const nightlyReport = schedule('nightly-report', {
  cron: '0 2 * * *',
  workflow: report,
  // The night of the worker's clock: a caught-up tick would report the wrong night.
  input: () => ({ night: new Date(Date.now()).toISOString().slice(0, 10), region: 'eu' }),
  catchUp: 'latest',
});

export const regionalReport = schedule('regional-report', {
  cron: '0 3 * * *',
  workflow: report,
  input: ({ scheduledAt }) => ({ night: scheduledAt.slice(0, 10), region: `${region}-${process.env['STAGE']}` }),
});
