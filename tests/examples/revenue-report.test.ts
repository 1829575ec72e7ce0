import { sql } from 'kysely';
import { beforeAll, expect, it } from 'vitest';
import { createClient, createWorker, migrate } from 'ledgerflow/runtime';
import { parseCron } from '../../dsl/cron.js';
import { revenueReportRegistration } from '../../examples/revenue-report/handlers.js';
import { nightlyRevenueReport } from '../../examples/revenue-report/nightly-revenue-report.js';
import { schedules, workflows } from '../../examples/workflows.js';
import { describeStores } from '../support/describe-stores.js';
import { waitUntil } from '../runtime/fixtures/run-helpers.js';

const SOURCES = ['generated/migrations', 'examples/migrations'];
const DAY = 24 * 3_600_000;

/**
 * The examples' nightly schedule: `examples/workflows.ts` exports it for `ledgerflow worker`, a
 * worker registers it for 02:00 Berlin time, and a night no worker was up for is reported once,
 * over the 24 hours before its tick.
 */
describeStores('nightly revenue report (examples/revenue-report)', (getStore) => {
  beforeAll(async () => {
    await migrate(getStore(), { sources: SOURCES });
  });

  it('is exported next to the example workflows for `ledgerflow worker --workflows examples/workflows.ts`', () => {
    expect(schedules).toEqual([nightlyRevenueReport]);
    expect(workflows.map((w) => w.workflow.name)).toContain('revenue-report');
  });

  it('reports the missed night once, from the payments of the 24 hours before its tick', async () => {
    const store = getStore();
    const worker = createWorker({
      store,
      workflows: [revenueReportRegistration()],
      schedules: [nightlyRevenueReport],
      scheduleIntervalMs: 50,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    await worker.start();
    const client = createClient({ store });
    try {
      const [registered] = await client.listSchedules();
      const next = registered!.nextTicks[0]!;
      const berlin = new Intl.DateTimeFormat('en-GB', {
        timeZone: 'Europe/Berlin',
        hour: '2-digit',
        minute: '2-digit',
      });
      expect(berlin.format(next)).toBe('02:00');
      // The tick before the next one (croner, in Berlin: 23 to 25 hours earlier), and payments
      // in the 24 hours before it, and one just before those.
      const night = parseCron(nightlyRevenueReport.cron, nightlyRevenueReport.timezone).previousRuns(1, next)[0]!;
      const at = (ms: number) => new Date(night.getTime() + ms).toISOString();
      await sql`INSERT INTO shop.payment (id, order_id, charge_id, amount_cents, currency, created_at) VALUES
                  ('p-1', 'o-1', 'ch_1', 1200, 'eur', ${at(-3_600_000)}),
                  ('p-2', 'o-2', 'ch_2', 300, 'eur', ${at(-7_200_000)}),
                  ('p-3', 'o-3', 'ch_3', 990, 'usd', ${at(-60_000)}),
                  ('p-4', 'o-4', 'ch_4', 5000, 'eur', ${at(-DAY - 60_000)})`.execute(store.db);

      // No worker was up for two nights: the latest one is reported, once.
      await store.db
        .updateTable('ledgerflow.schedule')
        .set({ next_tick_at: new Date(next.getTime() - 2 * DAY - 3_600_000) })
        .execute();
      const runId = await waitUntil(
        'the report of the missed night',
        async () => (await client.listSchedules())[0]!.lastRunId ?? undefined,
      );
      const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
      expect((await client.listSchedules())[0]!.lastTickAt).toEqual(night);
      expect(run).toMatchObject({
        status: 'completed',
        dedupe_key: `schedule:nightly-revenue-report:${night.toISOString()}`,
        input: { until: night.toISOString() },
      });
      expect(run.output).toEqual({
        sumPayments: {
          from: at(-DAY),
          until: night.toISOString(),
          currencies: [
            { currency: 'eur', payments: 2, cents: 1500 },
            { currency: 'usd', payments: 1, cents: 990 },
          ],
        },
      });
      expect(await client.listRuns({ workflow: 'revenue-report' })).toHaveLength(1);
    } finally {
      await worker.stop();
    }
  });
});
