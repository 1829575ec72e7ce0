import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { performance } from 'node:perf_hooks';
import { FakePaymentProvider } from '../examples/fakes/payment-provider.js';
import { createPgStore } from '../runtime/store/pg/pg-store.js';
import { prepareBenchDatabase } from './bench-database.js';
import { openBenchServer } from './environment.js';
import { benchRegistrations, oneStep, threeStep } from './workloads/bench-workflows.js';
import { measureWorkerCpu } from './workloads/worker-cpu.js';

/**
 * One worker-CPU drain (bench/workloads/worker-cpu.ts), alone, with V8's CPU profiler running
 * over the measured drain only (not start-up, enqueueing or the warm-up):
 * `npx tsx --conditions=ledgerflow-source bench/profile-drain.ts`; open the `.cpuprofile` it
 * writes in Chrome DevTools or speedscope.
 *
 *   LEDGERFLOW_PROFILE_WORKLOAD   W1 (default) or W2
 *   LEDGERFLOW_PROFILE_RUNS       runs drained (default 3000)
 *   LEDGERFLOW_PROFILE_C          concurrency (default 16)
 *   LEDGERFLOW_PROFILE_OUT        write the profile of the measured drain here (without it: no profiler, only the number)
 *   LEDGERFLOW_PROFILE_INTERVAL_US the profiler's sampling interval (default 100; a longer one disturbs the drain less)
 *   LEDGERFLOW_PROFILE_PREPARED=0 the worker's store runs no named statements (`preparedStatements: false`)
 *   DATABASE_URL                  use this server instead of starting one
 */
const workload = process.env['LEDGERFLOW_PROFILE_WORKLOAD'] ?? 'W1';
if (workload !== 'W1' && workload !== 'W2')
  throw new Error(`LEDGERFLOW_PROFILE_WORKLOAD must be W1 or W2 (got "${workload}").`);
const runs = Number(process.env['LEDGERFLOW_PROFILE_RUNS'] ?? 3000);
const concurrency = Number(process.env['LEDGERFLOW_PROFILE_C'] ?? 16);
const [workflow, stepsPerRun] = workload === 'W1' ? [oneStep, 1] : [threeStep, 3];
const out = process.env['LEDGERFLOW_PROFILE_OUT'];
const preparedStatements = process.env['LEDGERFLOW_PROFILE_PREPARED'] !== '0';
const profiler = new Session();
if (out !== undefined) {
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.setSamplingInterval', {
    interval: Number(process.env['LEDGERFLOW_PROFILE_INTERVAL_US'] ?? 100),
  });
}
const server = await openBenchServer();
try {
  const { url } = await prepareBenchDatabase(server, `bench_profile_${workload.toLowerCase()}_c${concurrency}`);
  const enqueueStore = createPgStore({ connectionString: url, maxConnections: 16 });
  const workerStore = createPgStore({ connectionString: url, maxConnections: concurrency + 2, preparedStatements });
  try {
    const started = performance.now();
    const row = await measureWorkerCpu({
      workload,
      workflow,
      stepsPerRun,
      registrations: benchRegistrations(new FakePaymentProvider()),
      runs,
      warmUpRuns: Math.min(200, runs),
      concurrency,
      enqueueStore,
      workerStore,
      ...(out !== undefined ? { beforeMeasuredDrain: () => profiler.post('Profiler.start') } : {}),
    });
    if (out !== undefined) writeFileSync(out, JSON.stringify((await profiler.post('Profiler.stop')).profile));
    process.stdout.write(
      `${workload} c=${concurrency}${preparedStatements ? '' : ' (no prepared statements)'}: ${row.steps} steps in ${row.seconds.toFixed(2)} s, ${row.cpuMsPerStep.toFixed(3)} worker CPU ms/step (system ${row.systemCpuMsPerStep.toFixed(3)}) ` +
        `(${((performance.now() - started) / 1000).toFixed(1)} s with enqueueing)${out !== undefined ? `; profile: ${out}` : ''}\n`,
    );
  } finally {
    await enqueueStore.close();
    await workerStore.close();
  }
} finally {
  await server.close();
}
