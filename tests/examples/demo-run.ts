import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import type { DemoReport } from '../../examples/demo/demo-report.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** Runs `npm start` (the same script) as a child process and parses its `--json` report. */
export async function runDemo(args: readonly string[], env: Readonly<Record<string, string>>): Promise<DemoReport> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'examples/demo/main.ts', '--json', ...args],
    {
      cwd: repoRoot,
      env: { ...process.env, LEDGERFLOW_FAULTS: '', DATABASE_URL: '', ...env },
      timeout: 170_000,
      maxBuffer: 10 * 1024 * 1024,
    },
  );
  return JSON.parse(stdout) as DemoReport;
}

/** What the issue asks the demo to show, checked from the report's raw counters. */
export function expectTheDemoClaims(report: DemoReport): void {
  const orders = report.orders;
  const lf = report.ledgerflow;
  const killed = lf.workers.filter((w) => w.outcome === 'killed');
  expect(killed.length).toBeGreaterThan(0);
  expect(lf.workers.at(-1)).toMatchObject({ outcome: 'finished' });
  const crashes = killed.map((w) => w.crash);
  for (const crash of crashes) expect(crash, 'every kill names the call that had just returned').toBeDefined();

  // ledgerflow: every run completed, and the providers' own counters say exactly one effect per order.
  expect(lf.runsByStatus).toEqual({ completed: orders.length });
  expect(Object.keys(lf.chargesPerOrder).sort()).toEqual([...orders].sort());
  expect(Object.values(lf.chargesPerOrder).every((n) => n === 1)).toBe(true);
  expect(Object.values(lf.receiptsPerOrder).every((n) => n === 1)).toBe(true);
  expect(lf.payments.rows).toBe(orders.length);
  // The order cancelled before its payment was recorded: charged once, refunded once, by its run's compensation.
  expect(lf.compensation).toMatchObject({ status: 'compensated', charges: 1, refunds: 1 });
  expect(lf.compensation.refundedCents).toBeGreaterThan(0);
  expect(lf.attempts.total).toBeGreaterThanOrEqual(4 * orders.length);
  // A receipt sent just before a kill can only have been recorded once through reconcile.
  for (const crash of crashes.filter((c) => c?.step === 'sendReceipt')) {
    expect(lf.reconciliations.map((r) => `${r.orderId}/${r.step}`)).toContain(`${crash?.orderId}/sendReceipt`);
  }
  // A charge performed just before a kill was sent again with the same key and deduped.
  if (crashes.some((c) => c?.step === 'chargeCard')) expect(lf.providerReplays).toBeGreaterThan(0);

  // naive: the same crashes; every crashed order was charged again on redelivery.
  const byOrder = (list: ReadonlyArray<{ orderId: string; step: string } | undefined>) =>
    list.map((c) => `${c?.orderId}/${c?.step}`).sort();
  expect(byOrder(report.naive.crashes)).toEqual(byOrder(crashes));
  expect(report.naive.acked).toBe(orders.length);
  for (const crash of crashes) {
    expect(report.naive.chargesPerOrder[crash!.orderId]).toBeGreaterThan(1);
    if (crash!.step === 'sendReceipt') expect(report.naive.receiptsPerOrder[crash!.orderId]).toBeGreaterThan(1);
  }
  const naiveCharges = Object.values(report.naive.chargesPerOrder).reduce((a, b) => a + b, 0);
  // At least one extra charge per crash (more if a slow consumer outlived a visibility timeout).
  expect(naiveCharges).toBeGreaterThanOrEqual(orders.length + crashes.length);
}
