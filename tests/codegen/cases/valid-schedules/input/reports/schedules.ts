import * as dsl from 'ledgerflow/dsl';
import { schedule } from 'ledgerflow/dsl';
import { report } from './report.workflow.js';

const REGION = 'us';

/** The night before the tick, from the tick alone: a caught-up tick reports the night it is for. */
function nightBefore(scheduledAt: string): string {
  return new Date(Date.parse(scheduledAt) - 86_400_000).toISOString().slice(0, 10);
}

function nightlyInput({ scheduledAt }: { readonly scheduledAt: string }) {
  return { night: nightBefore(scheduledAt), region: REGION };
}

export const nightlyReport = schedule('nightly-report', {
  cron: '0 2 * * *',
  timezone: 'Europe/Berlin',
  workflow: report,
  input: nightlyInput,
  catchUp: 'latest',
});

export const weeklyReport = dsl.schedule('weekly-report', {
  cron: '0 3 * * 1',
  workflow: report,
  input: ({ scheduledAt }) => ({ night: scheduledAt.slice(0, 10), region: `${REGION}-weekly` }),
  catchUp: { all: { max: 4 } },
});
