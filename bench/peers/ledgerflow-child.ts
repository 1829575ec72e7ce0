import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { providerCounts } from '../exactly-once.js';
import { benchRegistrations } from '../workloads/bench-workflows.js';
import { END_TO_END_WORKLOADS, measureEndToEnd } from '../workloads/end-to-end.js';
import { readJob, required, writeResult } from './peer-job.js';

/**
 * ledgerflow's side of `npm run bench:peers`, in a child process of its own as every peer's is
 * (bench/peers/<peer>/end-to-end.ts): a fresh process per measurement, the same warm-up, nothing
 * JIT-compiled by an earlier measurement. `measure` only: the parent prepares the database
 * (migrated, with the application table). The client is created with the worker and calls
 * `client.startAndWait` (bench/workloads/end-to-end.ts); a start-up and shutdown with no run is
 * measured first, for the commit counts to subtract.
 */
const job = readJob();
const workload = END_TO_END_WORKLOADS.find((w) => w.id === job.workload);
if (!workload) throw new Error(`unknown workload ${job.workload}`);
const payments = new FakePaymentProvider();
const options = {
  workflow: workload.workflow,
  registrations: benchRegistrations(payments),
  clients: job.clients,
  url: job.appDatabaseUrl,
  database: required(job, 'database'),
  adminUrl: required(job, 'statsUrl'),
};
const lifecycle = await measureEndToEnd({ ...options, runs: 0, warmUp: 0 });
const measurement = await measureEndToEnd({ ...options, runs: job.runs, warmUp: job.warmUp });
writeResult(job, {
  runs: measurement.runs,
  seconds: measurement.seconds,
  provider: providerCounts(payments),
  counted: { measurement, lifecycle },
});
