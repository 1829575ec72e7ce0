import type { AnyWorkflow } from '../dsl/index.js';
import { FakePaymentProvider } from '../examples/fakes/payment-provider.js';
import { createPgStore } from '../runtime/store/pg/pg-store.js';
import { prepareBenchDatabase } from './bench-database.js';
import { openBenchServer, type BenchServer } from './environment.js';
import { readServerCounters } from './server-stats.js';
import { benchRegistrations, oneStep, threeStep } from './workloads/bench-workflows.js';
import { measureDrain } from './workloads/drain.js';
import { measureFloor } from './workloads/w0-floor.js';

/**
 * A quick look at the drain ratios the group commit is about (minutes, not the full bench's
 * ten): W0 (one statement) and the W1/W2 drains at a few concurrencies, each drain with the
 * worker's group commit on and off, back to back, so that both sides see the same machine.
 * Not part of `npm test`.
 *
 *   npx tsx --conditions=ledgerflow-source bench/drain-ratios.ts
 *   LEDGERFLOW_BENCH_N            steps per measurement (default 1000)
 *   LEDGERFLOW_BENCH_CONCURRENCY  comma-separated concurrencies (default 1,4,16)
 *   LEDGERFLOW_BENCH_VARIANTS     group commit variants to drain: on,off (default both)
 */
const n = Number(process.env['LEDGERFLOW_BENCH_N'] ?? 1000);
const concurrencies = (process.env['LEDGERFLOW_BENCH_CONCURRENCY'] ?? '1,4,16').split(',').map(Number);
const variants = (process.env['LEDGERFLOW_BENCH_VARIANTS'] ?? 'on,off').split(',').map((v) => v === 'on');

async function drain(
  server: BenchServer,
  workflow: AnyWorkflow,
  runs: number,
  stepsPerRun: number,
  concurrency: number,
  groupCommit: boolean,
) {
  const database = `ratios_${workflow.name.replaceAll('-', '_')}_c${concurrency}_${groupCommit ? 'gc' : 'solo'}`;
  const { url } = await prepareBenchDatabase(server, database);
  const enqueueStore = createPgStore({ connectionString: url, maxConnections: 16 });
  const workerStore = createPgStore({ connectionString: url, maxConnections: concurrency + 2 });
  let before = { commits: 0, rollbacks: 0 };
  try {
    const m = await measureDrain({
      workflow,
      registrations: benchRegistrations(new FakePaymentProvider()),
      runs,
      concurrency,
      enqueueStore,
      workerStore,
      groupCommit,
      beforeDrain: async () => {
        await enqueueStore.close();
        before = await readServerCounters(server.adminUrl, database);
      },
    });
    await workerStore.close();
    const after = await readServerCounters(server.adminUrl, database);
    if (m.failedSteps > 0 || m.errors.length > 0)
      console.log(`  ! ${m.failedSteps} failed steps; ${m.errors.join('; ')}`);
    const steps = runs * stepsPerRun;
    return {
      stepsPerSecond: steps / m.seconds,
      commitsPerStep: (after.commits - before.commits) / steps,
      cpuMsPerStep: m.cpuMs / steps,
    };
  } finally {
    await enqueueStore.close().catch(() => {});
    await workerStore.close().catch(() => {});
  }
}

const server = await openBenchServer();
try {
  // Unreported: the first drain in a process pays for loading and JIT-compiling the worker.
  await drain(server, oneStep, 200, 1, 4, true);
  for (const concurrency of concurrencies) {
    const { url } = await prepareBenchDatabase(server, `ratios_w0_c${concurrency}`);
    const floor = (await measureFloor(url, concurrency, n, 'statement')).commitsPerSecond;
    console.log(`c=${concurrency} W0 ${floor.toFixed(0)} commits/s`);
    for (const [label, workflow, stepsPerRun] of [
      ['W1', oneStep, 1],
      ['W2', threeStep, 3],
    ] as const) {
      for (const groupCommit of variants) {
        const r = await drain(server, workflow, Math.ceil(n / stepsPerRun), stepsPerRun, concurrency, groupCommit);
        console.log(
          `c=${concurrency} ${label} group commit ${groupCommit ? 'on ' : 'off'}: ${r.stepsPerSecond.toFixed(0)} steps/s = ` +
            `${(r.stepsPerSecond / floor).toFixed(2)} × W0, ${r.commitsPerStep.toFixed(2)} commits/step, ${r.cpuMsPerStep.toFixed(3)} ms CPU/step`,
        );
      }
    }
  }
  console.log(
    `load average ${(await import('node:os'))
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
} finally {
  await server.close();
}
