import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { prepareBenchDatabase } from './bench-database.js';
import { describeEnvironment, openBenchServer, type BenchEnvironment, type BenchServer } from './environment.js';
import { oneStep, threeStep } from './workloads/bench-workflows.js';
import { measureFleetThroughput, type FleetThroughput } from './workloads/fleet.js';
import { measureFloor, type FloorResult } from './workloads/w0-floor.js';

/**
 * `npm run bench:ceiling`: where one primary ends on this machine. A backlog of one-step (W1) and
 * of three-step (W2: `step`, `transactional` writing an application row, keyed `external`) runs,
 * drained by 1, 4 and 8 worker PROCESSES (bench/workloads/fleet.ts: real workers in child
 * processes, timed by the database from the backlog's release to the last run's finished_at),
 * with the server's and the workers' CPU over each drain (/proc), and the one-statement floor
 * (W0, bench/workloads/w0-floor.ts) measured in the same run for the ratios. Writes
 * bench/results/ceiling-<date>.md and ceiling-latest.md. Never part of `npm test`.
 *
 *   LEDGERFLOW_CEILING_RUNS         runs per W1 drain (default 3000; W2 drains a third as many runs)
 *   LEDGERFLOW_CEILING_PROCESSES    worker process counts, comma-separated (default 1,4,8)
 *   LEDGERFLOW_CEILING_CONCURRENCY  each process's concurrency, comma-separated; `default` is the
 *                                   worker's own default (4) (default: default,16)
 *   DATABASE_URL                    use this server instead of starting one (CPU then not read)
 */
const FLOOR_CONCURRENCIES = [4, 16, 64] as const;

async function main(): Promise<void> {
  const runs = positiveInt('LEDGERFLOW_CEILING_RUNS', 3000);
  const processCounts = list('LEDGERFLOW_CEILING_PROCESSES', '1,4,8').map((p) => parsePositive(p, 'a process count'));
  const concurrencies = list('LEDGERFLOW_CEILING_CONCURRENCY', 'default,16').map((c) =>
    c === 'default' ? undefined : parsePositive(c, 'a concurrency'),
  );
  const started = performance.now();
  const loadAtStart = loadavg();
  const server = await openBenchServer();
  try {
    const environment = await describeEnvironment(server);
    const postmasterPid = await findPostmaster(server);
    log(`server: ${environment.serverVersion}, postmaster ${postmasterPid ?? 'not readable (CPU not measured)'}`);

    const floor: FloorResult[] = [];
    for (const concurrency of FLOOR_CONCURRENCIES) {
      const { url } = await prepareBenchDatabase(server, `bench_ceiling_w0_c${concurrency}`);
      const result = await measureFloor(url, concurrency, runs, 'statement');
      floor.push(result);
      log(`W0 floor c=${concurrency}: ${result.commitsPerSecond.toFixed(0)} commits/s`);
    }

    const fleets: FleetThroughput[] = [];
    for (const [workflow, workflowRuns] of [
      [oneStep, runs],
      [threeStep, Math.ceil(runs / 3)],
    ] as const) {
      for (const concurrencyEach of concurrencies) {
        for (const processes of processCounts) {
          const f = await measureFleetThroughput(server, {
            processes,
            runs: workflowRuns,
            workflow,
            ...(concurrencyEach === undefined ? {} : { concurrencyEach }),
            ...(postmasterPid === undefined ? {} : { postmasterPid }),
          });
          fleets.push(f);
          log(
            `${workflow.name} ${processes} process(es) × ${concurrencyEach ?? 'default'}: ${f.stepsPerSecond.toFixed(0)} steps/s, ` +
              `${f.workflowsPerSecond.toFixed(0)} workflows/s, ${f.commitsPerWorkflow.toFixed(2)} commits/workflow` +
              (f.cpu === undefined
                ? ''
                : `, server ${(f.cpu.serverSeconds / f.cpu.wallSeconds).toFixed(2)} cores, workers ${(f.cpu.workersSeconds / f.cpu.wallSeconds).toFixed(2)} cores`),
          );
        }
      }
    }
    const markdown = render({
      environment,
      runs,
      floor,
      fleets,
      load: [loadAtStart, loadavg()],
      seconds: (performance.now() - started) / 1000,
    });
    const dir = join(dirname(fileURLToPath(import.meta.url)), 'results');
    mkdirSync(dir, { recursive: true });
    const day = environment.date.slice(0, 10);
    for (const base of [`ceiling-${day}`, 'ceiling-latest']) writeFileSync(join(dir, `${base}.md`), markdown);
    log(`wrote bench/results/ceiling-${day}.md (and ceiling-latest.md)`);
  } finally {
    await server.close();
  }
}

/** The postmaster's pid, from postmaster.pid in the server's data directory, when that is on this machine. */
async function findPostmaster(server: BenchServer): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: server.adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ dir: string }>(`SELECT current_setting('data_directory') AS dir`);
    const pid = Number(readFileSync(join(rows[0]!.dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  } finally {
    await client.end();
  }
}

function render(r: {
  environment: BenchEnvironment;
  runs: number;
  floor: readonly FloorResult[];
  fleets: readonly FleetThroughput[];
  load: readonly [number[], number[]];
  seconds: number;
}): string {
  const e = r.environment;
  const best = r.floor.reduce((a, b) => (b.commitsPerSecond > a.commitsPerSecond ? b : a));
  const fmt = (x: number, digits = 0) => x.toFixed(digits);
  const loads = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
  const label = (name: string) => (name === oneStep.name ? 'W1 one step' : 'W2 three steps');
  const lines = [
    `# Where one primary ends: worker processes against one PostgreSQL — ${e.date.slice(0, 10)}`,
    '',
    `Produced by \`npm run bench:ceiling\` (\`bench/ceiling.ts\`) in ${fmt(r.seconds)} s. One durable server (fsync and synchronous commit on), the worker processes and the bench share this machine's ${e.cpuCount} cores. Each drain is a fresh database with a backlog inserted not due (W1: ${r.runs} one-step runs, one \`transactional\` step; W2: ${Math.ceil(r.runs / 3)} three-step runs, \`step\` → \`transactional\` writing an application row → keyed \`external\` to an in-process fake provider; LEDGERFLOW_CEILING_RUNS), released in one statement once every worker process has started; timed by the database from the release to the last run's \`finished_at\` (bench/workloads/fleet.ts). Each worker process is a real ledgerflow worker (bench/workloads/scale-worker.ts) with the stated concurrency (\`default\`: the worker's default, 4, on the store's default pool of 10).`,
    '',
    '| machine | |',
    '|---|---|',
    `| date | ${e.date} |`,
    `| CPU | ${e.cpuCount} × ${e.cpu} |`,
    `| memory | ${e.memoryGiB} GiB |`,
    `| OS | ${e.os} |`,
    `| Node.js | ${e.node} |`,
    `| server | ${e.serverVersion} (${e.serverOrigin}), shared_buffers ${e.sharedBuffers}, wal_sync_method ${e.walSyncMethod} |`,
    `| fsync / synchronous_commit / full_page_writes | ${e.fsync} / ${e.synchronousCommit} / ${e.fullPageWrites} |`,
    `| load average (1/5/15 min) at start / end | ${loads(r.load[0])} / ${loads(r.load[1])} |`,
    '',
    '## The floor (W0): one statement per step commit, one process',
    '',
    `Exactly the rows W1's step commits (the fenced transition, the attempt, the ledger row, the result) as ONE statement per step, ${r.runs} commits in a tight loop from this process. The ratios below divide by the best of these (c = ${best.concurrency}).`,
    '',
    '| connections | commits/s |',
    '|---:|---:|',
    ...r.floor.map((f) => `| ${f.concurrency} | ${fmt(f.commitsPerSecond)} |`),
    '',
    '## Worker processes draining one backlog',
    '',
    "Steps/s / W0 is steps per second over the floor's commits per second: above 1 where group commit puts several runs' steps in one commit. CPU is over the drain (from the release to the last completion seen, polled every 100 ms), in cores (CPU seconds per wall second): the PostgreSQL server's (postmaster, backends, background processes, from /proc/<pid>/stat), the worker processes' together, everything else that ran on the machine meanwhile (the bench's own polling, and any other work sharing the cores), and the whole machine's busy share of its cores (/proc/stat).",
    '',
    '| workload | processes × concurrency | steps/s | workflows/s | × 1 process | steps/s / W0 | commits / workflow | server cores | workers cores | other cores | machine busy |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...r.fleets.map((f) => {
      const one = r.fleets.find(
        (g) => g.workflow === f.workflow && g.concurrencyEach === f.concurrencyEach && g.processes === 1,
      );
      const c = f.cpu;
      const busy =
        c === undefined ? undefined : c.machine.busySeconds / (c.machine.busySeconds + c.machine.idleSeconds);
      return (
        `| ${label(f.workflow)} | ${f.processes} × ${f.concurrencyEach ?? 'default (4)'} | ${fmt(f.stepsPerSecond)} | ${fmt(f.workflowsPerSecond)} | ` +
        `${one === undefined ? '—' : fmt(f.workflowsPerSecond / one.workflowsPerSecond, 2)} | ${fmt(f.stepsPerSecond / best.commitsPerSecond, 2)} | ${fmt(f.commitsPerWorkflow, 2)} | ` +
        (c === undefined || busy === undefined
          ? '— | — | — | — |'
          : `${fmt(c.serverSeconds / c.wallSeconds, 2)} | ${fmt(c.workersSeconds / c.wallSeconds, 2)} | ${fmt((c.machine.busySeconds - c.serverSeconds - c.workersSeconds) / c.wallSeconds, 2)} | ${fmt(busy * 100)} % |`)
      );
    }),
    '',
  ];
  return lines.join('\n');
}

function list(name: string, fallback: string): string[] {
  const raw = process.env[name];
  return (raw === undefined || raw === '' ? fallback : raw).split(',').map((s) => s.trim());
}

function parsePositive(raw: string, what: string): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`bench:ceiling: ${what} must be a positive integer (got "${raw}")`);
  return value;
}

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  return raw === undefined || raw === '' ? fallback : parsePositive(raw, name);
}

function log(message: string): void {
  process.stderr.write(`[ceiling] ${message}\n`);
}

await main();
