import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { FakePaymentProvider } from '../../../examples/fakes/payment-provider.js';
import { PgDataSource } from './pg-datasource.js';

/**
 * The end-to-end workloads on DBOS Transact, run by bench/peers/main.ts in a child process
 * whose modules resolve from bench/peers/node_modules. One job per process, given as JSON in
 * LEDGERFLOW_PEERS_JOB:
 *
 *   prepare  launch (creating DBOS's schema in the system and application databases), shut down
 *   measure  launch; `clients` clients each start a workflow and await its result, then start the
 *            next, `warmUp` untimed and `runs` timed; shut down; write `{ runs, seconds, charges }`
 *            to `resultFile`
 *
 * The workloads mirror bench/workloads/end-to-end.ts: one step returning a small object; and a
 * step computing, a data source transaction writing one application row, a step calling the
 * in-process provider with an idempotency key (workflow id + step).
 */
interface Job {
  readonly mode: 'prepare' | 'measure';
  readonly workload: 'one-step' | 'three-step';
  readonly systemDatabaseUrl: string;
  readonly appDatabaseUrl: string;
  readonly clients: number;
  readonly runs: number;
  readonly warmUp: number;
  readonly resultFile: string;
}

const job = JSON.parse(process.env['LEDGERFLOW_PEERS_JOB'] ?? 'null') as Job | null;
if (!job) throw new Error('LEDGERFLOW_PEERS_JOB is not set: this script is run by bench/peers/main.ts (npm run bench:peers).');

const app = new PgDataSource('bench-app', { connectionString: job.appDatabaseUrl, max: job.clients + 2 });
const payments = new FakePaymentProvider();

const reserve = app.registerTransaction(async (workflowId: string, i: number) => {
  const { rows } = await PgDataSource.client().query<{ id: string }>(
    'INSERT INTO bench_app.reservation (run_id, item) VALUES ($1, $2) RETURNING id',
    [workflowId, i],
  );
  return { reservationId: Number(rows[0]!.id) };
}, 'reserve');

const oneStep = DBOS.registerWorkflow(async (i: number) => DBOS.runStep(async () => ({ i }), { name: 'compute' }), { name: 'bench-one-step' });

const threeStep = DBOS.registerWorkflow(
  async (i: number) => {
    const workflowId = DBOS.workflowID!;
    const { amountCents } = await DBOS.runStep(async () => ({ amountCents: 100 + i }), { name: 'load' });
    const { reservationId } = await reserve(workflowId, i);
    const { chargeId } = await DBOS.runStep(
      async () => {
        const charge = await payments.charge(
          { reference: `bench-${i}`, amountCents, currency: 'eur', customerId: 'bench' },
          { idempotencyKey: `${workflowId}:charge` },
        );
        return { chargeId: charge.id };
      },
      { name: 'charge' },
    );
    return { reservationId, chargeId };
  },
  { name: 'bench-three-step' },
);

DBOS.setConfig({
  name: 'ledgerflow-bench-peers',
  systemDatabaseUrl: job.systemDatabaseUrl,
  systemDatabasePoolSize: Math.max(10, job.clients + 4),
  logLevel: 'error',
});
await DBOS.launch();
try {
  if (job.mode === 'measure') {
    const workflow: (i: number) => Promise<unknown> = job.workload === 'one-step' ? oneStep : threeStep;
    const closedLoop = async (from: number, to: number): Promise<void> => {
      let next = from;
      const loop = async (): Promise<void> => {
        for (let i = next++; i < to; i = next++) {
          const handle = await DBOS.startWorkflow(workflow)(i);
          await handle.getResult();
        }
      };
      await Promise.all(Array.from({ length: job.clients }, loop));
    };
    await closedLoop(0, job.warmUp);
    const started = performance.now();
    await closedLoop(job.warmUp, job.warmUp + job.runs);
    const seconds = (performance.now() - started) / 1000;
    writeFileSync(job.resultFile, JSON.stringify({ runs: job.runs, seconds, charges: payments.totalCharges() }));
  }
} finally {
  await DBOS.shutdown();
}
