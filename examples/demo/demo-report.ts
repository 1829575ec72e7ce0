import type { LedgerflowResult } from './ledgerflow-scenario.js';
import type { NaiveResult } from './naive-scenario.js';

/** What `npm start -- --json` prints; `tests/examples/demo.test.ts` reads it. */
export interface DemoReport {
  readonly orders: readonly string[];
  readonly store: 'pglite' | 'pg';
  readonly dataLocation: string;
  /** CLI flags that open the same database (e.g. ` --data-dir /tmp/x`), empty for the default. */
  readonly inspectFlags: string;
  readonly ledgerflow: LedgerflowResult;
  readonly naive: NaiveResult;
  readonly wallMs: number;
}

const sum = (counts: Readonly<Record<string, number>>): number => Object.values(counts).reduce((a, b) => a + b, 0);
const over = (counts: Readonly<Record<string, number>>, limit: number): string[] =>
  Object.entries(counts)
    .filter(([, n]) => n > limit)
    .map(([id, n]) => `${id} ×${n}`);

function perOrder(counts: Readonly<Record<string, number>>, what: string): string {
  const total = sum(counts);
  const orders = Object.keys(counts).length;
  const values = new Set(Object.values(counts));
  if (values.size === 1 && values.has(1)) return `${total} ${what} for ${orders} orders: exactly 1 each`;
  const twice = over(counts, 1);
  const missing = Object.entries(counts)
    .filter(([, n]) => n === 0)
    .map(([id]) => id);
  return (
    `${total} ${what} for ${orders} orders` +
    (twice.length > 0 ? `; more than once: ${twice.join(', ')}` : '') +
    (missing.length > 0 ? `; none: ${missing.join(', ')}` : '')
  );
}

/** The human-readable report: every number is read from a provider's counters or the database. */
export function formatReport(report: DemoReport): string {
  const { ledgerflow: lf, naive } = report;
  const completed = lf.runsByStatus.completed ?? 0;
  const others = Object.entries(lf.runsByStatus)
    .filter(([status]) => status !== 'completed')
    .map(([status, n]) => `${n} ${status}`);
  const lines = [
    '',
    `ledgerflow: ${report.orders.length} order-payment runs, ${lf.workers.filter((w) => w.outcome === 'killed').length} worker processes SIGKILLed between a provider call and its ledger write`,
    '',
    '  worker processes:',
    ...lf.workers.map((w) =>
      w.outcome === 'killed'
        ? `    ${w.workerId}  killed right after ${w.crash?.step ?? '?'} returned for order ${w.crash?.orderId ?? '?'}`
        : `    ${w.workerId}  ${w.faults ? 'faults on but none fired' : 'no faults'}; ran until nothing was left`,
    ),
    '',
    `  runs completed     ${completed}/${report.orders.length}${others.length > 0 ? ` (${others.join(', ')})` : ''}`,
    `  card charges       ${perOrder(lf.chargesPerOrder, 'charges')}   [payment provider's counters]`,
    `  receipts sent      ${perOrder(lf.receiptsPerOrder, 'receipts')}   [email provider's counters]`,
    `  same-key replays   ${lf.providerReplays} charge request(s) answered with the first charge   [payment provider]`,
    `  step attempts      ${lf.attempts.total} (${lf.attempts.retries} beyond the first) — ${Object.entries(
      lf.attempts.byStep,
    )
      .map(([step, n]) => `${step} ${n}`)
      .join(', ')}   [ledgerflow.step_attempt]`,
    `  reconciliations    ${lf.reconciliations.length}   [ledgerflow.step_effect]`,
    ...lf.reconciliations.map((r) => `    ${r.orderId} ${r.step}: ${r.resolution}`),
    `  payments recorded  ${lf.payments.rows} rows, ${(lf.payments.revenueCents / 100).toFixed(2)} EUR   [shop.payment]`,
    `  compensated        order ${lf.compensation.orderId}, cancelled before its payment was recorded: run ${lf.compensation.status}, ` +
      `${lf.compensation.charges} charge(s), ${lf.compensation.refunds} refund(s) of ${(lf.compensation.refundedCents / 100).toFixed(2)} EUR   [payment provider]`,
    '',
    `naive queue retry: the same orders and crashes, handled by a consumer with no ledger — it charges`,
    `without an idempotency key and emails without a lookup, and the queue redelivers what was not acked:`,
    '',
    ...naive.crashes.map(
      (c) => `    killed right after ${c.step} returned for order ${c.orderId}; the message was redelivered`,
    ),
    `  messages acked     ${naive.acked}/${report.orders.length} (${naive.redeliveries} redelivered)`,
    `  card charges       ${perOrder(naive.chargesPerOrder, 'charges')}   [payment provider's counters]`,
    `  receipts sent      ${perOrder(naive.receiptsPerOrder, 'receipts')}   [email provider's counters]`,
    '',
    `Data: ${report.dataLocation}. Inspect it with \`npx ledgerflow runs${report.inspectFlags}\` and ` +
      `\`npx ledgerflow effects${report.inspectFlags}\`${report.store === 'pglite' ? ' (PGlite: one process at a time)' : ''}.`,
    `Finished in ${(report.wallMs / 1000).toFixed(1)} s. Run \`npm start -- --json\` for these numbers as JSON.`,
    '',
  ];
  return lines.join('\n');
}
