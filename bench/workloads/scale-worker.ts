/**
 * One worker process of the scale bench's fleet (bench/workloads/scale.ts): a ledgerflow worker
 * for the bench workflows on DATABASE_URL. Prints `ready` on stdout once it has started;
 * SIGTERM stops it gracefully.
 *
 * Env: DATABASE_URL, SCALE_WORKER_NAME, SCALE_CONCURRENCY (empty: the worker's default concurrency).
 */
import { createWorker } from '../../runtime/index.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { benchRegistrations } from './bench-workflows.js';

function required(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`scale worker: ${name} is not set`);
  return value;
}

const name = required('SCALE_WORKER_NAME');
const given = process.env['SCALE_CONCURRENCY'];
/** Undefined: the worker's default, whose pool is then the store's default size. */
const concurrency = given === undefined || given === '' ? undefined : Number(given);
const store = createPgStore({
  connectionString: required('DATABASE_URL'),
  applicationName: `ledgerflow-bench-${name}`,
  ...(concurrency === undefined ? {} : { maxConnections: concurrency + 2 }),
});
const worker = createWorker({
  store,
  workflows: benchRegistrations(new FakePaymentProvider()),
  workerId: `bench-${name}`,
  ...(concurrency === undefined ? {} : { concurrency }),
  leaseMs: 30_000,
  pollIntervalMs: 100,
  reconcileIntervalMs: 0,
  onEvent: (event) => {
    if (event.type === 'error')
      process.stderr.write(`[${name}] ${event.where}: ${event.error.name}: ${event.error.message}\n`);
    if (event.type === 'step-failed') process.stderr.write(`[${name}] step failed\n`);
  },
});

process.once('SIGTERM', () => {
  void worker
    .stop({ timeoutMs: 5_000 })
    .then(() => store.close())
    .then(
      () => process.exit(0),
      () => process.exit(1),
    );
});

await worker.start();
process.stdout.write('ready\n');
