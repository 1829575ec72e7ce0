import { FakePaymentProvider } from '../examples/fakes/payment-provider.js';
import { prepareBenchDatabase } from './bench-database.js';
import { openBenchServer } from './environment.js';

/**
 * Worker CPU per step of W1 (or W2) drains, this checkout against a baseline checkout, in ONE process on
 * one server: both trees' runtimes are loaded side by side and drained in turn (ABBA, BAAB, …),
 * so that a shared machine's load falls on both alike. Prints each drain, then the medians and
 * the ratios new / base. Not part of `npm test` or `npm run bench`.
 *
 *   git worktree add /tmp/base <commit> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   LEDGERFLOW_AB_BASE=/tmp/base npx tsx --conditions=ledgerflow-source bench/cpu-ab.ts
 *
 *   LEDGERFLOW_AB_BASE    the baseline checkout (required)
 *   LEDGERFLOW_AB_RUNS    runs per measured drain (default 2000)
 *   LEDGERFLOW_AB_ROUNDS  rounds of four drains per concurrency (default 3)
 *   LEDGERFLOW_AB_WARM    runs of each tree's warm-up drain (default 2000: V8 has compiled the hot path after it)
 *   LEDGERFLOW_AB_C       comma-separated concurrencies (default 4,16)
 *   LEDGERFLOW_AB_WORKLOAD W1 (default: one transactional step) or W2 (step, transactional, external)
 *   DATABASE_URL          use this server instead of starting one
 */
const BASE = process.env['LEDGERFLOW_AB_BASE'];
if (BASE === undefined)
  throw new Error('LEDGERFLOW_AB_BASE must name the baseline checkout (a directory with runtime/ and bench/).');
const trees = {
  base: {
    store: await import(`${BASE}/runtime/store/pg/pg-store.js`),
    wf: await import(`${BASE}/bench/workloads/bench-workflows.js`),
    drain: await import(`${BASE}/bench/workloads/drain.js`),
    fake: await import(`${BASE}/examples/fakes/payment-provider.js`),
  },
  new: {
    store: await import('../runtime/store/pg/pg-store.js'),
    wf: await import('./workloads/bench-workflows.js'),
    drain: await import('./workloads/drain.js'),
    fake: { FakePaymentProvider },
  },
};
const runs = Number(process.env['LEDGERFLOW_AB_RUNS'] ?? 2000);
const rounds = Number(process.env['LEDGERFLOW_AB_ROUNDS'] ?? 3);
const warm = Number(process.env['LEDGERFLOW_AB_WARM'] ?? 2000);
const cs = (process.env['LEDGERFLOW_AB_C'] ?? '4,16').split(',').map(Number);
const workload = process.env['LEDGERFLOW_AB_WORKLOAD'] ?? 'W1';
if (workload !== 'W1' && workload !== 'W2')
  throw new Error(`LEDGERFLOW_AB_WORKLOAD must be W1 or W2 (got "${workload}").`);
const stepsPerRun = workload === 'W1' ? 1 : 3;
type Tree = 'base' | 'new';
const ORDERS: readonly (readonly Tree[])[] = [
  ['base', 'new', 'new', 'base'],
  ['new', 'base', 'base', 'new'],
];
const server = await openBenchServer();
const results: Record<string, { cpu: number[]; sps: number[] }> = {};
async function once(tree: Tree, c: number, n: number, record: boolean): Promise<void> {
  const t = trees[tree];
  const { url } = await prepareBenchDatabase(server, `ab_${tree}_c${c}`);
  const enqueueStore = t.store.createPgStore({ connectionString: url, maxConnections: 16 });
  const workerStore = t.store.createPgStore({ connectionString: url, maxConnections: c + 2 });
  try {
    const m = await t.drain.measureDrain({
      workflow: workload === 'W1' ? t.wf.oneStep : t.wf.threeStep,
      registrations: t.wf.benchRegistrations(new t.fake.FakePaymentProvider()),
      runs: n,
      concurrency: c,
      enqueueStore,
      workerStore,
    });
    if (m.failedSteps > 0 || m.errors.length > 0) throw new Error(`${tree}: ${m.errors.join('; ')}`);
    if (record) {
      const k = `${tree} c=${c}`;
      const steps = n * stepsPerRun;
      (results[k] ??= { cpu: [], sps: [] }).cpu.push(m.cpuMs / steps);
      results[k].sps.push(steps / m.seconds);
      console.log(`${k}: ${(m.cpuMs / steps).toFixed(3)} ms/step, ${(steps / m.seconds).toFixed(0)} steps/s`);
    }
  } finally {
    await enqueueStore.close();
    await workerStore.close();
  }
}
for (const c of cs) for (const tree of ORDERS[0]!.slice(0, 2)) await once(tree, c, warm, false);
for (let r = 0; r < rounds; r++) for (const c of cs) for (const tree of ORDERS[r % 2]!) await once(tree, c, runs, true);
const med = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
for (const c of cs) {
  const b = results[`base c=${c}`]!,
    n = results[`new c=${c}`]!;
  console.log(
    `c=${c}: CPU ms/step median base ${med(b.cpu).toFixed(3)} new ${med(n.cpu).toFixed(3)} (min ${Math.min(...b.cpu).toFixed(3)} / ${Math.min(...n.cpu).toFixed(3)}); new/base CPU ${(med(n.cpu) / med(b.cpu)).toFixed(2)}; throughput new/base ${(med(n.sps) / med(b.sps)).toFixed(2)} (${med(b.sps).toFixed(0)} / ${med(n.sps).toFixed(0)} steps/s)`,
  );
}
await server.close();
