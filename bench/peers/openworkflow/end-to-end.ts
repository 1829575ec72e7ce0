import { OpenWorkflow } from 'openworkflow';
import { BackendPostgres } from 'openworkflow/postgres';
import pg from 'pg';
import { FakePaymentProvider } from '../../../examples/fakes/payment-provider.js';
import { providerCounts } from '../../exactly-once.js';
import { measureClosedLoop, readJob, required, reserveOnce, writeResult } from '../peer-job.js';

/**
 * The end-to-end workloads on OpenWorkflow with its PostgreSQL backend, run by
 * bench/peers/main.ts in a child process whose modules resolve from
 * bench/peers/openworkflow/node_modules. This process runs the worker (`ow.newWorker` with
 * concurrency c) and the clients: each starts a run (`workflow.run`) and waits for its output.
 *
 * The wait: OpenWorkflow 0.10's `handle.result()` reads the run every second (a constant of the
 * client), which would cap a closed loop at about c workflows/s and measure that constant, not
 * the engine. The clients here issue the same read (`backend.getWorkflowRun`) every
 * {@link RESULT_POLL_MS} ms instead — the fastest wait the public API allows without
 * hammering the server. Its pool gets 2c + 2 connections (postgres.js `max`, in the URL), as
 * ledgerflow's store does.
 *
 * The workloads mirror bench/workloads/end-to-end.ts: one `step.run` returning a small object;
 * and a `step.run` computing, a `step.run` writing the application row keyed by the run id (a
 * step cannot share the row's transaction: peer-job.ts `reserveOnce`), a `step.run` calling the
 * in-process provider with the run id + step as idempotency key.
 */
const RESULT_POLL_MS = 10;

const job = readJob();
const payments = new FakePaymentProvider();
const systemDatabaseUrl = required(job, 'systemDatabaseUrl');

if (job.mode === 'prepare') {
  const backend = await BackendPostgres.connect(systemDatabaseUrl);
  await backend.stop();
} else {
  const url = new URL(systemDatabaseUrl);
  url.searchParams.set('max', String(2 * job.clients + 2));
  const backend = await BackendPostgres.connect(url.toString(), { runMigrations: false });
  const app = new pg.Pool({ connectionString: job.appDatabaseUrl, max: job.clients + 2 });
  app.on('error', () => {});
  const ow = new OpenWorkflow({ backend });
  const oneStep = ow.defineWorkflow(
    { name: 'bench-one-step' },
    async ({ input, step }: { input: { i: number }; step: StepRun }) =>
      step.run({ name: 'compute' }, async () => ({ i: input.i })),
  );
  const threeStep = ow.defineWorkflow(
    { name: 'bench-three-step' },
    async ({ input, step, run }: { input: { i: number }; step: StepRun; run: { id: string } }) => {
      const { amountCents } = await step.run({ name: 'load' }, async () => ({ amountCents: 100 + input.i }));
      const { reservationId } = await step.run({ name: 'reserve' }, () =>
        reserveOnce((text, values) => app.query(text, [...values]), run.id, input.i),
      );
      const { chargeId } = await step.run({ name: 'charge' }, async () => {
        const charge = await payments.charge(
          { reference: `bench-${input.i}`, amountCents, currency: 'eur', customerId: 'bench' },
          { idempotencyKey: `${run.id}:charge` },
        );
        return { chargeId: charge.id };
      });
      return { reservationId, chargeId };
    },
  );
  const workflow = job.workload === 'one-step' ? oneStep : threeStep;
  const worker = ow.newWorker({ concurrency: job.clients });
  await worker.start();
  try {
    const seconds = await measureClosedLoop(job, async (i) => {
      const handle = await workflow.run({ i });
      await waitForRun(backend, handle.workflowRun.id);
    });
    writeResult(job, { runs: job.runs, seconds, provider: providerCounts(payments) });
  } finally {
    await worker.stop();
    await backend.stop();
    await app.end();
  }
}

/** The part of OpenWorkflow's step API the workflows use. */
interface StepRun {
  run<Output>(config: { name: string }, fn: () => Promise<Output>): Promise<Output>;
}

/** What `handle.result()` does, reading every {@link RESULT_POLL_MS} ms instead of every second. */
async function waitForRun(backend: BackendPostgres, workflowRunId: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const run = await backend.getWorkflowRun({ workflowRunId });
    if (!run) throw new Error(`OpenWorkflow run ${workflowRunId} no longer exists`);
    if (run.status === 'completed' || run.status === 'succeeded') return;
    if (run.status === 'failed' || run.status === 'canceled')
      throw new Error(`OpenWorkflow run ${workflowRunId} ended ${run.status}: ${JSON.stringify(run.error)}`);
    if (Date.now() > deadline)
      throw new Error(`OpenWorkflow run ${workflowRunId} not finished after 60 s (status ${run.status})`);
    await new Promise((resolve) => setTimeout(resolve, RESULT_POLL_MS));
  }
}
