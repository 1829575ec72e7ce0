import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createWorker, NotAppliedError, type Client } from 'ledgerflow/runtime';
import { createDashboard } from 'ledgerflow/dashboard';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { ORIGIN, session } from '../dashboard/support/browserless-session.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { FakeRefundDesk } from '../support/refund-desk.js';
import { runCli } from '../support/run-cli.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { chargeThenRefund, chargeThenRefundHandlers } from './fixtures/compensation-crash-workflow.js';

/*
 * How compensating runs look to an operator (issue 17): the CLI's `runs` and `run` and the
 * dashboard label a run that is compensating as such, list `compensation_failed` runs, and
 * `ledgerflow retry` resumes one's compensation (audited) until it is `compensated`.
 */
describe('compensating runs in the CLI and the dashboard [pg]', () => {
  let store: TestStore;
  let client: Client;
  let db: string[];
  const payments = new FakePaymentProvider();
  const desk = new FakeRefundDesk();
  let deskOpen = false;
  const registration = () =>
    chargeThenRefundHandlers(payments, {
      refund: (request) => {
        if (!deskOpen) throw new NotAppliedError('the refund desk is closed');
        return desk.refund(request);
      },
      find: (key) => desk.find(key),
    });
  const drain = async (): Promise<void> => {
    const worker = createWorker({ store, workflows: [registration()], pollIntervalMs: 20, reconcileIntervalMs: 0 });
    try {
      await worker.drain({ timeoutMs: 20_000 });
    } finally {
      await worker.stop();
    }
  };
  let failedRun: string;
  let compensating: string;

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [chargeThenRefund]);
    client = createClient({ store });
    db = ['--database-url', store.url!];
    failedRun = (await client.start(chargeThenRefund, { orderId: 'v-1', amountCents: 900 })).runId;
    await drain();
    // A run a cancel with compensate put back to pending at its compensation, no worker yet.
    compensating = (await client.start(chargeThenRefund, { orderId: 'v-2', amountCents: 100 })).runId;
    await sql`UPDATE ledgerflow.workflow_run SET compensation = 'cancel', current_step = 2 WHERE id = ${compensating}`.execute(
      store.db,
    );
  });
  afterAll(() => store?.close());

  it('runs and run label a compensating run, and list the compensation_failed one', async () => {
    expect((await client.getRun(failedRun)).status).toBe('compensation_failed');
    const pending = await runCli(['runs', '--status', 'pending', ...db]);
    expect(pending.code).toBe(0);
    expect(pending.stdout).toMatch(new RegExp(`${compensating} +crash-refund v1 +pending, compensating \\(cancel\\)`));
    const parked = await runCli(['runs', '--status', 'compensation_failed', ...db]);
    expect(parked.stdout).toMatch(new RegExp(`${failedRun} +crash-refund v1 +compensation_failed `));
    expect(parked.stdout).not.toContain(compensating);
    const one = await runCli(['run', compensating, ...db]);
    expect(one.stdout).toMatch(/status +pending, compensating \(cancel\)\n/);
    expect(one.stdout).toMatch(
      /compensation +in progress: the run was cancelled, so its recorded effects are being undone\n/,
    );
    expect(one.stdout).toMatch(/current step +undoing charge: refund\n/);
  });

  it('the dashboard labels it, counts compensation_failed runs and offers to retry the failed compensation', async () => {
    const app = createDashboard({ store, workflows: [chargeThenRefund] });
    const list = await (await app.fetch(new Request(`${ORIGIN}/`))).text();
    expect(list).toContain(
      '<span class="st st-compensating" title="undoing its recorded effects">compensating (cancel)</span>',
    );
    expect(list).toMatch(
      /st-compensation_failed">compensation_failed<\/span> <span data-count="compensation_failed">1</,
    );
    const failedPage = await (await app.fetch(new Request(`${ORIGIN}/runs/${failedRun}`))).text();
    expect(failedPage).toContain('Retry the failed compensation…');
    expect(failedPage).not.toContain('Cancel run…');
    const compensatingPage = await (await app.fetch(new Request(`${ORIGIN}/runs/${compensating}`))).text();
    expect(compensatingPage).toContain('compensating (cancel)');
    expect(compensatingPage).not.toContain('Cancel run…');
  });

  it('a cancel of a compensating run is refused and says why: ledgerflow cancel exits 1, the dashboard shows a notice', async () => {
    const cli = await runCli(['cancel', compensating, '--reason', 'stop it', ...db]);
    expect(cli).toEqual({
      code: 1,
      stdout:
        `Run ${compensating} was not cancelled: it is pending, compensating (cancel). A compensating run is not cancelled: it goes on\n` +
        'undoing its recorded effects until it is compensated or compensation_failed.\n',
      stderr: '',
    });
    const json = await runCli(['cancel', compensating, '--json', ...db]);
    expect(JSON.parse(json.stdout)).toEqual({
      runId: compensating,
      cancelled: false,
      status: 'pending',
      compensation: 'cancel',
    });

    const app = createDashboard({ store, workflows: [chargeThenRefund] });
    const browser = session(app.fetch);
    const form = await (await browser.get(`/runs/${compensating}/cancel`)).text();
    expect(form).toContain('A run that is compensating is not\ncancelled');
    const csrf = await browser.csrfFrom(`/runs/${compensating}/cancel`);
    const done = await browser.post(`/runs/${compensating}/cancel`, { reason: 'stop it', csrf });
    expect(done.headers.get('location')).toBe(`/runs/${compensating}?done=compensating`);
    expect(await (await browser.get(done.headers.get('location')!)).text()).toContain(
      'The run is compensating: it is not cancelled',
    );
    expect(await client.getRun(compensating)).toMatchObject({ status: 'pending', compensation: 'cancel' });
    expect(await client.listAudit({ runId: compensating })).toEqual([]);
  });

  it('ledgerflow retry resumes the failed compensation, audited; the run ends compensated with one refund', async () => {
    deskOpen = true;
    const retried = await runCli(['retry', failedRun, '--reason', 'refund desk reopened', '--actor', 'ops', ...db]);
    expect(retried).toMatchObject({ code: 0, stderr: '' });
    expect(retried.stdout).toBe(
      `Retried run ${failedRun} (was compensation_failed) from step "refund": pending, due now.\n`,
    );
    await drain();
    expect(await client.getRun(failedRun)).toMatchObject({ status: 'compensated', compensation: 'failure' });
    const chargeId = payments.charges().find((c) => c.idempotencyKey === 'charge:v-1')!.id;
    expect(desk.refundsByCharge().get(chargeId)).toBe(1);
    const audit = await runCli(['audit', '--run', failedRun, ...db]);
    expect(audit.stdout).toMatch(/ops +retry/);
  });
});
