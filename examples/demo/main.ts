/**
 * `npm start`: the crash demo. Needs nothing running: without DATABASE_URL it uses the
 * embedded PGlite under .ledgerflow/ (with it, that PostgreSQL server).
 *
 *   npm start [-- --orders 20 --kills 3 --seed 6 --data-dir .ledgerflow/db --json]
 *
 * 1. migrates and starts one `order-payment` run per order;
 * 2. runs workers as child processes, SIGKILLing each of the first few at the `after-perform`
 *    fault point (the provider was called, the ledger does not know yet), then one without faults;
 * 3. reports what the providers' own counters and the database say;
 * 4. replays the same orders and crashes through a naive queue consumer, for contrast.
 */
import { randomBytes } from 'node:crypto';
import { DEFAULT_DATA_DIR } from 'ledgerflow/runtime';
import { demoOrders } from './demo-orders.js';
import { formatReport, type DemoReport } from './demo-report.js';
import { runLedgerflowScenario } from './ledgerflow-scenario.js';
import { runNaiveScenario } from './naive-scenario.js';

const USAGE = `Usage: npm start -- [options]

Runs order-payment workflows while killing worker processes between a provider call and the
ledger write, then the same crashes through a naive queue consumer, and compares what the
fake providers counted.

Options:
  --orders <n>      orders to run (default 20)
  --kills <n>       worker processes to SIGKILL before one runs without faults (default 3)
  --seed <n>        fault-injection seed (default 6)
  --data-dir <dir>  PGlite data directory (default ${DEFAULT_DATA_DIR}; ignored when DATABASE_URL is set)
  --json            print the report as JSON only
  -h, --help        show this help
`;

interface DemoOptions {
  readonly orders: number;
  readonly kills: number;
  readonly seed: number;
  readonly dataDir: string;
  readonly json: boolean;
}

function parseOptions(argv: readonly string[]): DemoOptions | 'help' {
  const options = { orders: 20, kills: 3, seed: 6, dataDir: DEFAULT_DATA_DIR, json: false };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    const value = (): string => {
      const next = argv[(i += 1)];
      if (next === undefined) throw new UsageError(`${flag} needs a value.`);
      return next;
    };
    const integer = (min: number, max: number): number => {
      const text = value();
      const n = Number(text);
      if (!Number.isInteger(n) || n < min || n > max)
        throw new UsageError(`${flag} must be an integer from ${min} to ${max} (got "${text}").`);
      return n;
    };
    switch (flag) {
      case '--orders':
        options.orders = integer(1, 500);
        break;
      case '--kills':
        options.kills = integer(0, 20);
        break;
      case '--seed':
        options.seed = integer(0, 2 ** 31 - 1);
        break;
      case '--data-dir':
        options.dataDir = value();
        break;
      case '--json':
        options.json = true;
        break;
      case '-h':
      case '--help':
        return 'help';
      default:
        throw new UsageError(`Unknown option "${flag}".`);
    }
  }
  return options;
}

class UsageError extends Error {}

async function main(argv: readonly string[]): Promise<number> {
  let options: DemoOptions | 'help';
  try {
    options = parseOptions(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (options === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  const started = performance.now();
  const log = options.json
    ? () => {}
    : (line: string) => process.stdout.write(`  · ${((performance.now() - started) / 1000).toFixed(1)}s ${line}\n`);
  // A fresh batch prefix per demo run: several runs can share one database without colliding.
  const batch = `demo-${randomBytes(2).toString('hex')}`;
  const orders = demoOrders(batch, options.orders);

  const [cancelledOrder] = demoOrders(`${batch}-cancelled`, 1);
  const ledgerflow = await runLedgerflowScenario({
    dataDir: options.dataDir,
    orders,
    cancelledOrder: cancelledOrder!,
    kills: options.kills,
    seed: options.seed,
    log,
  });
  const crashes = ledgerflow.workers.flatMap((w) => (w.crash !== undefined ? [w.crash] : []));
  const naive = await runNaiveScenario({ orders, crashes, log });

  const report: DemoReport = {
    orders: orders.map((o) => o.orderId),
    store: process.env['DATABASE_URL'] ? 'pg' : 'pglite',
    dataLocation: ledgerflow.location,
    inspectFlags:
      process.env['DATABASE_URL'] || options.dataDir === DEFAULT_DATA_DIR ? '' : ` --data-dir ${options.dataDir}`,
    ledgerflow,
    naive,
    wallMs: Math.round(performance.now() - started),
  };
  process.stdout.write(options.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
