import { randomUUID } from 'node:crypto';
import * as restate from '@restatedev/restate-sdk';
import * as clients from '@restatedev/restate-sdk-clients';
import pg from 'pg';
import { FakePaymentProvider } from '../../../examples/fakes/payment-provider.js';
import { providerCounts } from '../../exactly-once.js';
import { measureClosedLoop, readJob, required, reserveOnce, writeResult } from '../peer-job.js';

/**
 * The end-to-end workloads on Restate, run by bench/peers/main.ts in a child process whose
 * modules resolve from bench/peers/restate/node_modules, against the Restate server main.ts
 * started for this measurement (bench/peers/restate/server.ts). As a Restate application
 * runs: this process serves the workflows (`restate.serve`, HTTP/2) and registers itself with
 * the server's admin API; its clients submit a workflow through the server's ingress
 * (`workflowSubmit`, the workflow id a fresh UUID) and wait for its result (`workflowAttach`);
 * the server drives each invocation by calling this process back, journaling every `ctx.run`
 * result in its own log before the handler goes on.
 *
 * The workloads mirror bench/workloads/end-to-end.ts: one `ctx.run` returning a small object;
 * and a `ctx.run` computing, a `ctx.run` writing the application row keyed by the workflow id
 * (a `ctx.run` cannot share the row's transaction: peer-job.ts `reserveOnce`), a `ctx.run`
 * calling the in-process provider with the workflow id + step as idempotency key.
 */
const job = readJob();
const payments = new FakePaymentProvider();
const app = new pg.Pool({ connectionString: job.appDatabaseUrl, max: job.clients + 2 });
app.on('error', () => {});

const oneStep = restate.workflow({
  name: 'benchOneStep',
  handlers: {
    run: async (ctx: restate.WorkflowContext, input: { i: number }) => ctx.run('compute', async () => ({ i: input.i })),
  },
});

const threeStep = restate.workflow({
  name: 'benchThreeStep',
  handlers: {
    run: async (ctx: restate.WorkflowContext, input: { i: number }) => {
      const workflowId = ctx.key;
      const { amountCents } = await ctx.run('load', async () => ({ amountCents: 100 + input.i }));
      const { reservationId } = await ctx.run('reserve', () =>
        reserveOnce((text, values) => app.query(text, [...values]), workflowId, input.i),
      );
      const { chargeId } = await ctx.run('charge', async () => {
        const charge = await payments.charge(
          { reference: `bench-${input.i}`, amountCents, currency: 'eur', customerId: 'bench' },
          { idempotencyKey: `${workflowId}:charge` },
        );
        return { chargeId: charge.id };
      });
      return { reservationId, chargeId };
    },
  },
});

try {
  if (job.mode === 'measure') {
    const port = await restate.serve({ services: [oneStep, threeStep], port: 0 });
    await register(required(job, 'adminUrl'), `http://127.0.0.1:${port}`);
    const ingress = clients.connect({ url: required(job, 'ingressUrl') });
    const startAndWait =
      job.workload === 'one-step'
        ? async (i: number): Promise<void> => {
            const workflow = ingress.workflowClient(oneStep, randomUUID());
            await workflow.workflowSubmit({ i });
            await workflow.workflowAttach();
          }
        : async (i: number): Promise<void> => {
            const workflow = ingress.workflowClient(threeStep, randomUUID());
            await workflow.workflowSubmit({ i });
            await workflow.workflowAttach();
          };
    const seconds = await measureClosedLoop(job, startAndWait);
    writeResult(job, { runs: job.runs, seconds, provider: providerCounts(payments) });
  }
} finally {
  await app.end();
}
// restate.serve gives no handle to close its HTTP/2 server: the measurement is over.
process.exit(0);

/** Registers this process's endpoint with the server (Restate discovers the workflows from it). */
async function register(adminUrl: string, uri: string): Promise<void> {
  const response = await fetch(`${adminUrl}/deployments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ uri }),
  });
  if (!response.ok)
    throw new Error(`Restate refused the deployment ${uri}: ${response.status} ${await response.text()}`);
}
