import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { event, shapeHash, workflow, type AnyWorkflow } from 'ledgerflow/dsl';
import {
  bindHandlers,
  createClient,
  createWorker,
  NonRetryableError,
  type Client,
  type WorkflowRegistration,
} from 'ledgerflow/runtime';
import { createDashboard } from 'ledgerflow/dashboard';
import { ORIGIN, session } from '../dashboard/support/browserless-session.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runCli } from '../support/run-cli.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';

/**
 * What the CLI and the dashboard say about a run, read as a person reads it: a step skipped by its
 * condition is "skipped", not a succeeded attempt; the step a run is at is named and counted among
 * the workflow's own steps (its compensations are not steps of it); why a run compensated is said
 * in words; a cancel that starts a compensation says so; an error is its message, with the
 * stack behind a click.
 */
const orderInput = z.object({ orderId: z.string(), fail: z.boolean() });
type OrderInput = z.output<typeof orderInput>;
const charged = z.object({ chargeId: z.string() });
const done = z.object({ ok: z.boolean() });
const shipped = event('label.shipped', z.object({ orderId: z.string() }));

const charge = {
  output: charged,
  key: ({ input }: { input: OrderInput }) => `charge:${input.orderId}`,
  idempotentByKey: true as const,
  compensate: {
    name: 'refund' as const,
    key: ({ input }: { input: OrderInput }) => `refund:${input.orderId}`,
    output: z.object({ refundId: z.string() }),
    idempotentByKey: true as const,
  },
};

/** Five steps (one skipped by its condition) and one compensation. */
const shop = workflow('label-shop', { version: 1, input: orderInput })
  .step('price', { output: done })
  .external('charge', charge)
  .step('giftWrap', { output: done, when: () => false })
  .step('confirm', { output: done, retry: { maxAttempts: 1 } })
  .step('notify', { output: done });

/** Charged, then waits to be shipped; a cancel refunds the charge. */
const hold = workflow('label-hold', { version: 1, input: orderInput, compensateOnCancel: true })
  .external('charge', charge)
  .waitFor('shipped', { event: shipped, match: ({ input }) => input.orderId });

const WORKFLOWS: readonly AnyWorkflow[] = [shop, hold];
const ok = () => ({ ok: true });
const chargeHandlers = {
  charge: { perform: async ({ key }: { key: string }) => ({ chargeId: `ch_${key}` }) },
  refund: { perform: async ({ key }: { key: string }) => ({ refundId: `re_${key}` }) },
};
const REGISTRATIONS: WorkflowRegistration[] = [
  bindHandlers(
    shop,
    {
      ...chargeHandlers,
      price: ok,
      giftWrap: ok,
      confirm: ({ input }) => {
        if (input.fail)
          throw new NonRetryableError(
            'the warehouse refused the order:\n  sku-1 is out of stock\n  sku-2 is discontinued',
          );
        return { ok: true };
      },
      notify: ok,
    },
    shapeHash(shop),
  ),
  bindHandlers(hold, chargeHandlers, shapeHash(hold)),
];

describe('run labels in the CLI and the dashboard [pg]', () => {
  let store: TestStore;
  let client: Client;
  let db: string[];
  const runs = { completed: '', compensated: '', held: '', heldToo: '' };
  const drain = async (): Promise<void> => {
    const worker = createWorker({ store, workflows: REGISTRATIONS, pollIntervalMs: 20, reconcileIntervalMs: 0 });
    try {
      await worker.drain({ timeoutMs: 20_000 });
    } finally {
      await worker.stop();
    }
  };
  const page = async (path: string): Promise<string> =>
    (await createDashboard({ store, workflows: WORKFLOWS }).fetch(new Request(`${ORIGIN}${path}`))).text();

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, WORKFLOWS);
    client = createClient({ store, workflows: WORKFLOWS });
    db = ['--database-url', store.url!];
    runs.completed = (await client.start(shop, { orderId: 'l-1', fail: false })).runId;
    runs.compensated = (await client.start(shop, { orderId: 'l-2', fail: true })).runId;
    runs.held = (await client.start(hold, { orderId: 'l-3', fail: false })).runId;
    runs.heldToo = (await client.start(hold, { orderId: 'l-4', fail: false })).runId;
    await drain();
    expect((await client.getRun(runs.completed)).status).toBe('completed');
    expect((await client.getRun(runs.compensated)).status).toBe('compensated');
    expect((await client.getRun(runs.held)).status).toBe('waiting');
  }, 60_000);
  afterAll(() => store?.close());

  it('a step skipped by its condition: "skipped" in the attempts and the timeline, not a green succeeded bar', async () => {
    const html = await page(`/runs/${runs.completed}`);
    expect(html).toMatch(
      /<rect class="bar" data-step="giftWrap" data-attempt="1" data-status="skipped"[^>]*fill="#c4cad1"/,
    );
    expect(html).toMatch(
      /<tr><td>giftWrap<\/td><td class="num">1<\/td><td><span class="st st-skipped"[^>]*>skipped<\/span>/,
    );
    const cli = await runCli(['run', runs.completed, ...db]);
    expect(cli.stdout).toMatch(/\ngiftWrap +1 +skipped \(its condition was false\) /);
  });

  it('the step a run is at is named and counted among its five steps; a finished run shows it finished', async () => {
    const list = await runCli(['runs', '--workflow', 'label-shop', ...db]);
    expect(list.stdout.split('\n')[0]).toMatch(/ STATUS +STEP +WAITING FOR /);
    expect(list.stdout).toMatch(new RegExp(`${runs.completed} +label-shop v1 +completed +done \\(5 of 5\\) `));
    expect(list.stdout).toMatch(new RegExp(`${runs.compensated} +label-shop v1 +compensated +undone `));
    const held = await runCli(['runs', '--workflow', 'label-hold', ...db]);
    expect(held.stdout).toMatch(new RegExp(`${runs.held} +label-hold v1 +waiting +2 of 2: shipped `));
    expect((await runCli(['run', runs.completed, ...db])).stdout).toMatch(/\ncurrent step +done \(5 of 5\)\n/);

    const listed = await page('/?workflow=label-shop');
    expect(listed).toContain('<td>done (5 of 5)</td>');
    expect(listed).toContain('<td>undone</td>');
    expect(await page(`/runs/${runs.completed}`)).toContain('<dt>current step</dt><dd>done (5 of 5)</dd>');
  });

  it('why a run compensated is said in words, not as "compensation: failure"', async () => {
    const cli = await runCli(['run', runs.compensated, ...db]);
    expect(cli.stdout).toMatch(/\ncompensation +undone: a step failed for good, so its recorded effects were undone\n/);
    expect(cli.stdout).not.toMatch(/\ncompensation +failure\n/);
    const html = await page(`/runs/${runs.compensated}`);
    expect(html).toContain(
      '<dt>compensation</dt><dd>undone: a step failed for good, so its recorded effects were undone</dd>',
    );
  });

  it('the error box shows the message in words, its stack behind a click', async () => {
    const html = await page(`/runs/${runs.compensated}`);
    const box = html.slice(html.indexOf('<div id="error">'), html.indexOf('<h2>Operator actions'));
    expect(box).toContain(
      '<p class="error-text">NonRetryableError: the warehouse refused the order:\n  sku-1 is out of stock\n  sku-2 is discontinued</p>',
    );
    expect(box).toMatch(/<details><summary>Details<\/summary><pre>[\s\S]*at [\s\S]*<\/pre><\/details>/);
    expect(box).not.toContain('\\n');
  });

  it('ledgerflow cancel of a run that starts compensating says so, not "Cancelled run"', async () => {
    const cli = await runCli(['cancel', runs.held, ...db]);
    expect(cli).toEqual({
      code: 0,
      stdout: `Run ${runs.held} is compensating (not cancelled): its recorded effects are being undone. It ends compensated, or compensation_failed if an undo fails.\n`,
      stderr: '',
    });
    await drain();
    expect(await client.getRun(runs.held)).toMatchObject({ status: 'compensated', compensation: 'cancel' });
    expect((await runCli(['run', runs.held, ...db])).stdout).toMatch(
      /\ncompensation +undone: the run was cancelled, so its recorded effects were undone\n/,
    );
  });

  it('the dashboard says the same after its cancel', async () => {
    const browser = session(createDashboard({ store, workflows: WORKFLOWS }).fetch);
    const csrf = await browser.csrfFrom(`/runs/${runs.heldToo}/cancel`);
    const done = await browser.post(`/runs/${runs.heldToo}/cancel`, { reason: 'customer withdrew', csrf });
    expect(done.headers.get('location')).toBe(`/runs/${runs.heldToo}?done=cancel-compensating`);
    const shown = await (await browser.get(done.headers.get('location')!)).text();
    expect(shown).toContain('The run is compensating, not cancelled: its recorded effects are being undone.');
    expect(shown).not.toContain('The run was cancelled.');
  });
});
