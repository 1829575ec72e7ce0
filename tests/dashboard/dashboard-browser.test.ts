import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createWorker, type Client, type Worker } from 'ledgerflow/runtime';
import { serveDashboard, type ServedDashboard } from 'ledgerflow/dashboard';
import { waitUntil } from '../runtime/fixtures/run-helpers.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import {
  batch,
  DASHBOARD_WORKFLOWS,
  dashboardHandlers,
  flaky,
  fulfil,
  ordersV1,
  ordersV2,
  receipt,
} from './fixtures/dashboard-workflows.js';

/**
 * The dashboard in a real headless browser (Debian's chromium, driven by playwright-core) over
 * real runs made by real workers on PostgreSQL: completed runs in two versions, a run failed
 * after retries, a run whose first worker process was SIGKILLed inside a step and whose charge was
 * retried, an open intent parked for an operator, and a parent waiting for children that wait for
 * an event. An operator clicks through the lists, the filters and a run's timeline and ledger,
 * resolves the intent (an invalid output first: the error is shown and nothing is written), retries
 * the failed run, cancels the waiting one, and finds the three in the audit trail.
 *
 * Screenshots go to tests/dashboard/screenshots/ (not committed); with
 * LEDGERFLOW_UPDATE_SCREENSHOT=1 the run page's is also copied to docs/operations/dashboard.png for docs/operations/dashboard.md.
 */
const CHROMIUM = '/usr/bin/chromium';
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SHOTS = fileURLToPath(new URL('./screenshots/', import.meta.url));
const CRASH_WORKER = fileURLToPath(new URL('./fixtures/crash-worker.ts', import.meta.url));
const KILL_IN_RESERVE = JSON.stringify({
  seed: 13,
  points: { 'inside-transactional-handler': { probability: 1, actions: ['kill'], times: 1 } },
});

describe('dashboard in a browser [pg]', () => {
  let store: TestStore;
  let client: Client;
  let worker: Worker;
  let served: ServedDashboard;
  let browser: Browser;
  let page: Page;
  const runs: Record<'failed' | 'crashed' | 'parked' | 'parent' | 'v1', string> = {
    failed: '',
    crashed: '',
    parked: '',
    parent: '',
    v1: '',
  };

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `The dashboard's browser tests need Debian's chromium at ${CHROMIUM}: run \`apt-get install chromium\` (CI's .ci/run installs it).`,
      );
    }
    store = await createPgTestStore();
    await migrateForTest(store, DASHBOARD_WORKFLOWS);
    client = createClient({ store, workflows: DASHBOARD_WORKFLOWS });

    // A worker process dies inside the reserve step of this run (SIGKILL at a fault point).
    runs.crashed = (await client.start(fulfil, { orderId: 'ful-1', quantity: 2 })).runId;
    const crash = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>(
      (resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', CRASH_WORKER], {
          cwd: ROOT,
          env: { ...process.env, DATABASE_URL: store.url!, LEDGERFLOW_FAULTS: KILL_IN_RESERVE },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        child.once('error', reject);
        child.once('exit', (code, signal) => resolve({ code, signal, stderr }));
      },
    );
    expect(crash.signal, crash.stderr).toBe('SIGKILL');

    for (let i = 1; i <= 3; i++)
      await client.start(ordersV2, { orderId: `ord-${i}`, amountCents: 1_000 * i }, { dedupeKey: `ord-${i}` });
    runs.v1 = (
      await client.start(ordersV1, { orderId: 'ord-legacy', amountCents: 500 }, { dedupeKey: 'legacy-1' })
    ).runId;
    runs.failed = (await client.start(flaky, { label: 'nightly-sync' })).runId;
    runs.parked = (await client.start(receipt, { orderId: 'rcpt-1' })).runId;
    runs.parent = (await client.start(batch, { batchId: 'b-1', skus: ['sku-a', 'sku-b', 'sku-c'] })).runId;
    worker = createWorker({
      store,
      workflows: dashboardHandlers(),
      leaseMs: 2_000,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    await worker.start();
    const expected = {
      crashed: 'completed',
      failed: 'failed',
      parked: 'needs_reconciliation',
      parent: 'waiting',
    } as const;
    const statuses = async () =>
      Object.fromEntries(
        await Promise.all(
          Object.keys(expected).map(async (k) => [k, (await client.getRun(runs[k as keyof typeof expected])).status]),
        ),
      );
    await waitUntil(
      'the runs to settle',
      async () => {
        const now = await statuses();
        const children = (await client.getRun(runs.parent)).children.filter((c) => c.status === 'waiting').length;
        return Object.entries(expected).every(([k, v]) => now[k] === v) && children === 3;
      },
      20_000,
    ).catch(async (error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(await statuses())}`);
    });

    served = await serveDashboard({ store, workflows: DASHBOARD_WORKFLOWS, port: 0 });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await worker?.stop();
    await store?.close();
  });

  const shot = (name: string) => page.screenshot({ path: `${SHOTS}${name}.png`, fullPage: true });
  const open = async (path: string) => {
    const response = await page.goto(new URL(path, served.url).toString());
    expect(response?.status(), path).toBe(200);
  };

  it('lists runs with counts per status, filters them, and pages newest first', async () => {
    await open('/');
    await expect(page.locator('span[data-count="completed"]').textContent()).resolves.toBe('5');
    await expect(page.locator('span[data-count="failed"]').textContent()).resolves.toBe('1');
    await expect(page.locator('#runs tbody tr').count()).resolves.toBe(11);
    await shot('runs');

    await open('/?limit=4');
    const seen: string[] = [];
    for (;;) {
      seen.push(
        ...(await page
          .locator('#runs tbody tr td:first-child a')
          .evaluateAll((links) => links.map((a) => a.getAttribute('title')!))),
      );
      if ((await page.locator('#next-page').count()) === 0) break;
      const before = page.url();
      await Promise.all([page.waitForURL((url) => url.toString() !== before), page.click('#next-page')]);
    }
    expect(seen).toHaveLength(11);
    expect(new Set(seen).size).toBe(11);

    // Each filter submits the form: the rows are read once the filtered page has loaded.
    await page.selectOption('select[name=status]', 'failed');
    await Promise.all([page.waitForURL(/status=failed/), page.click('form.filters button[type=submit]')]);
    await expect(page.locator('#runs tbody tr').count()).resolves.toBe(1);
    expect(await page.locator('#runs tbody').textContent()).toContain('dash-flaky');

    await page.goto(new URL('/', served.url).toString());
    await page.fill('input[name=workflow]', 'dash-orders');
    await page.fill('input[name=version]', '1');
    await Promise.all([page.waitForURL(/version=1/), page.click('form.filters button[type=submit]')]);
    await expect(page.locator('#runs tbody tr').count()).resolves.toBe(1);
    expect(await page.locator('#runs tbody').textContent()).toContain('legacy-1');

    await page.goto(new URL('/', served.url).toString());
    await page.fill('input[name=key]', 'ord-');
    await page.selectOption('select[name=match]', 'prefix');
    await Promise.all([page.waitForURL(/match=prefix/), page.click('form.filters button[type=submit]')]);
    expect(await page.locator('#runs tbody tr td:nth-child(4)').allTextContents()).toEqual(['ord-1', 'ord-2', 'ord-3']);
  });

  it('shows a run: its timeline with the crash and the retry, its ledger, steps and attempts', async () => {
    await open('/?workflow=dash-fulfil');
    await page.click(`a[href="/runs/${runs.crashed}"]`);
    await page.waitForSelector('#timeline');
    const bars = await page
      .locator('#timeline rect.bar')
      .evaluateAll((rects) =>
        rects.map(
          (r) => `${r.getAttribute('data-step')}#${r.getAttribute('data-attempt')} ${r.getAttribute('data-status')}`,
        ),
      );
    // The worker died inside reserve; price, a plain step before it, was carried to reserve's
    // transaction, which the crash rolled back. So the database last showed price's attempt
    // running: the crash is recorded there, price runs again, and reserve runs once.
    expect(bars).toEqual([
      'price#1 abandoned',
      'price#2 succeeded',
      'reserve#1 succeeded',
      'charge#1 failed',
      'charge#2 succeeded',
      'giftWrap#1 skipped',
      'ship#1 succeeded',
    ]);
    expect(await page.locator('#timeline rect[data-status=skipped] title').textContent()).toContain(
      'skipped (its condition was false)',
    );
    expect(await page.locator('#attempts tbody tr:has-text("giftWrap")').textContent()).toContain('skipped');
    expect(await page.locator('dl').textContent()).toContain('done (5 of 5)');
    expect(await page.locator('#timeline rect[data-status=abandoned]').getAttribute('fill')).toBe('url(#crash)');
    expect(await page.locator('#timeline rect[data-status=failed] title').textContent()).toContain(
      '503 Service Unavailable',
    );
    const ledger = await page.locator('#ledger tbody tr').allTextContents();
    expect(ledger).toHaveLength(2);
    expect(ledger[0]).toContain('reserve:ful-1');
    expect(ledger[1]).toContain('charge:ful-1');
    expect(ledger.every((row) => row.includes('recorded'))).toBe(true);
    expect(await page.locator('#attempts').textContent()).toContain('LeaseExpired');
    await expect(page.locator('#steps tbody tr').count()).resolves.toBe(5);
    await shot('run-detail');
    if (process.env['LEDGERFLOW_UPDATE_SCREENSHOT'] === '1') {
      await page.screenshot({ path: `${SHOTS}readme.png`, clip: { x: 0, y: 0, width: 1200, height: 900 } });
      copyFileSync(`${SHOTS}readme.png`, `${ROOT}docs/operations/dashboard.png`);
    }

    await open(`/runs/${runs.parent}`);
    await expect(page.locator('#children tbody tr').count()).resolves.toBe(3);
    expect(await page.locator('dl').textContent()).toContain('3 of 3 children open');
    await page.click('#children tbody tr:first-child a');
    expect(await page.locator('#waits tbody').textContent()).toContain('dash.stocked');
  });

  it('resolves an open intent as found: a bad output is shown and writes nothing; a good one records it and the run goes on', async () => {
    await open('/intents');
    const rows = await page.locator('#intents tbody tr').allTextContents();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain('receipt:rcpt-1');
    expect(rows[0]).toMatch(/due|in \d+ (s|min)/);
    await page.click('#intents a:has-text("Resolve…")');

    await page.fill('#output', '{"messageId": ');
    await page.fill('input[name=reason]', 'checked the provider console');
    await page.click('#confirm button[type=submit]');
    expect(await page.locator('#action-error').textContent()).toContain('The output is not valid JSON');

    await page.fill('#output', '{"messageId": "m-42"}');
    await page.click('#confirm button[type=submit]');
    const schemaError = await page.locator('#action-error').textContent();
    expect(schemaError).toContain('does not match the output schema of step send');
    expect(schemaError).toContain('messageId');
    await shot('resolve-error');
    expect((await client.getRun(runs.parked)).effects.map((e) => e.status)).toEqual(['intent']);
    expect(await client.listAudit({ runId: runs.parked })).toEqual([]);

    await page.fill('#output', '{"messageId": "msg_42"}');
    await page.click('#confirm button[type=submit]');
    expect(await page.locator('#notice').textContent()).toContain('recorded as found');
    const run = await client.getRun((await client.waitForRun(runs.parked, { timeoutMs: 10_000 })).id);
    expect(run.status).toBe('completed');
    expect(run.output).toMatchObject({ done: { messageId: 'msg_42' } });
    expect(run.effects.map((e) => e.status)).toEqual(['recorded']);
  });

  it('retries the failed run from its failed step, and it completes', async () => {
    await open(`/runs/${runs.failed}`);
    await expect(page.locator('#timeline rect[data-status=failed]').count()).resolves.toBe(3);
    // The error in words; its stack only after a click.
    expect(await page.locator('#error .error-text').textContent()).toBe('Error: upstream 503 on call 3');
    expect(await page.locator('#error details pre').isVisible()).toBe(false);
    await page.click('#error details summary');
    expect(await page.locator('#error details pre').textContent()).toMatch(
      /^step: work\nattempt: 3\n\nError: upstream 503 on call 3\n +at /,
    );
    await shot('run-error');
    await page.click('text=Retry from the failed step…');
    await page.fill('input[name=reason]', 'upstream is back');
    await page.click('#confirm button[type=submit]');
    expect(await page.locator('#notice').textContent()).toContain('put back to pending');
    const run = await client.getRun((await client.waitForRun(runs.failed, { timeoutMs: 10_000 })).id);
    expect(run.status).toBe('completed');
    expect(run.attempts.map((a) => a.status)).toEqual(['failed', 'failed', 'failed', 'succeeded']);
  });

  it('cancels the waiting parent (its children with it), and the audit trail shows the three actions', async () => {
    await open(`/runs/${runs.parent}`);
    await page.click('text=Cancel run…');
    // The reason is required: the browser does not submit the form without one.
    await page.click('#confirm button[type=submit]');
    expect((await client.getRun(runs.parent)).status).toBe('waiting');
    await page.fill('input[name=reason]', 'batch b-1 was withdrawn');
    await page.click('#confirm button[type=submit]');
    expect(await page.locator('#notice').textContent()).toContain('The run was cancelled.');
    const parent = await client.getRun(runs.parent);
    expect(parent.status).toBe('cancelled');
    expect(parent.children.map((c) => c.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);

    await open('/audit');
    const audit = await page.locator('#audit tbody tr').allTextContents();
    expect(audit).toHaveLength(3);
    const actor = `dashboard@${hostname()}`;
    expect(audit[0]).toContain('cancel');
    expect(audit[0]).toContain('batch b-1 was withdrawn');
    expect(audit[1]).toContain('retry');
    expect(audit[1]).toContain('upstream is back');
    expect(audit[2]).toContain('resolve-found');
    expect(audit[2]).toContain('checked the provider console');
    expect(audit.every((row) => row.includes(actor))).toBe(true);
    await shot('audit');
  });
});
