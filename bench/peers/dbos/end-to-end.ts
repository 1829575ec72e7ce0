import { DBOS } from '@dbos-inc/dbos-sdk';
import { FakePaymentProvider } from '../../../examples/fakes/payment-provider.js';
import { providerCounts } from '../../exactly-once.js';
import { measureClosedLoop, readJob, required, writeResult } from '../peer-job.js';
import { PgDataSource } from './pg-datasource.js';

/**
 * The end-to-end workloads on DBOS Transact, run by bench/peers/main.ts in a child process
 * whose modules resolve from bench/peers/dbos/node_modules; the job (prepare: launch, creating
 * DBOS's schema in the system and application databases, and shut down; measure: the closed
 * loop) comes from bench/peers/peer-job.ts. DBOS executes a workflow in the process that starts
 * it: `DBOS.startWorkflow(workflow)(i)`, then `handle.getResult()`.
 *
 * The workloads mirror bench/workloads/end-to-end.ts: one step returning a small object; and a
 * step computing, a data source transaction writing one application row (its outcome recorded
 * in the application database in the same transaction), a step calling the in-process provider
 * with an idempotency key (workflow id + step).
 */
const job = readJob();
const app = new PgDataSource('bench-app', { connectionString: job.appDatabaseUrl, max: job.clients + 2 });
const payments = new FakePaymentProvider();

const reserve = app.registerTransaction(async (workflowId: string, i: number) => {
  const { rows } = await PgDataSource.client().query<{ id: string }>(
    'INSERT INTO bench_app.reservation (run_id, item) VALUES ($1, $2) RETURNING id',
    [workflowId, i],
  );
  return { reservationId: Number(rows[0]!.id) };
}, 'reserve');

const oneStep = DBOS.registerWorkflow(async (i: number) => DBOS.runStep(async () => ({ i }), { name: 'compute' }), {
  name: 'bench-one-step',
});

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
  systemDatabaseUrl: required(job, 'systemDatabaseUrl'),
  systemDatabasePoolSize: Math.max(10, job.clients + 4),
  logLevel: 'error',
});
await DBOS.launch();
try {
  if (job.mode === 'measure') {
    const workflow: (i: number) => Promise<unknown> = job.workload === 'one-step' ? oneStep : threeStep;
    const seconds = await measureClosedLoop(job, async (i) => {
      const handle = await DBOS.startWorkflow(workflow)(i);
      await handle.getResult();
    });
    writeResult(job, { runs: job.runs, seconds, provider: providerCounts(payments) });
  }
} finally {
  await DBOS.shutdown();
}
