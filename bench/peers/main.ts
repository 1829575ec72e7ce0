import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { expectReservations } from '../bench-database.js';
import { describeEnvironment, openBenchServer, type BenchServer } from '../environment.js';
import { renderChartPng, renderChartSvg, type ChartSeries } from '../report/chart.js';
import { sideBySideTable } from '../report/end-to-end.js';
import { renderPeersMarkdown } from '../report/peers.js';
import type { EndToEndRow } from '../results-model.js';
import { readServerCounters, readWalSyncs } from '../server-stats.js';
import { BENCH_APP_SQL, benchRegistrations } from '../workloads/bench-workflows.js';
import { END_TO_END_WORKLOADS, endToEndRow, ledgerflowEndToEnd, type EndToEndWorkload } from '../workloads/end-to-end.js';

/**
 * `npm run bench:peers`: the end-to-end workloads (bench/workloads/end-to-end.ts) on ledgerflow
 * and on DBOS Transact, on one durable PostgreSQL server in one run, each engine in databases
 * of its own; writes bench/results/peers-latest.md (and a dated copy) with a chart. Never part
 * of `npm test`. DBOS runs in child processes (bench/peers/dbos/end-to-end.ts) whose modules
 * come from bench/peers/node_modules, installed here with `npm ci` when missing, so the root
 * package never depends on it.
 *
 *   LEDGERFLOW_PEERS_N        timed workflows per measurement (default 400)
 *   LEDGERFLOW_PEERS_WARMUP   untimed workflows before each (default 20)
 *   DATABASE_URL              use this server instead of starting one
 */
const CLIENTS = [1, 4, 16] as const;
const PEER = 'DBOS Transact';
const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');

async function main(): Promise<void> {
  const runs = positiveInt('LEDGERFLOW_PEERS_N', 400);
  const warmUp = positiveInt('LEDGERFLOW_PEERS_WARMUP', 20);
  ensurePeerInstalled();
  const started = performance.now();
  const loadAtStart = loadavg()[0] ?? 0;
  const server = await openBenchServer();
  const registrations = benchRegistrations(new FakePaymentProvider());
  try {
    const environment = await describeEnvironment(server);
    log(`server: ${environment.serverVersion}, fsync=${environment.fsync}, synchronous_commit=${environment.synchronousCommit}`);
    const rows: EndToEndRow[] = [];
    for (const workload of END_TO_END_WORKLOADS) {
      for (const clients of CLIENTS) {
        const ours = await ledgerflowEndToEnd(server, { workload, clients, runs, warmUp, registrations });
        const theirs = await dbosEndToEnd(server, { workload, clients, runs, warmUp });
        log(
          `${workload.id} c=${clients}: ledgerflow ${ours.workflowsPerSecond.toFixed(0)} workflows/s (${ours.commitsPerWorkflow.toFixed(2)} commits/workflow), ` +
            `${PEER} ${theirs.workflowsPerSecond.toFixed(0)} (${theirs.commitsPerWorkflow.toFixed(2)}): ${(ours.workflowsPerSecond / theirs.workflowsPerSecond).toFixed(2)} ×`,
        );
        rows.push(ours, theirs);
      }
    }
    const results = {
      environment,
      peer: PEER,
      peerPackages: peerPackages(),
      totalSeconds: (performance.now() - started) / 1000,
      loadAverage: [loadAtStart, loadavg()[0] ?? 0] as const,
      sizes: `Each measurement times ${runs} workflows after ${warmUp} untimed ones (LEDGERFLOW_PEERS_N, LEDGERFLOW_PEERS_WARMUP); the clients, the engine and the server share this machine.`,
      rows,
    };
    process.stdout.write(`${sideBySideTable(rows, PEER)}\n`);
    writeResults(results);
  } finally {
    await server.close();
  }
}

/** One DBOS measurement: a fresh application and system database, prepared by one child and measured by the next. */
async function dbosEndToEnd(
  server: BenchServer,
  o: { readonly workload: EndToEndWorkload; readonly clients: number; readonly runs: number; readonly warmUp: number },
): Promise<EndToEndRow> {
  const appDatabase = `bench_dbos_${o.workload.id.replaceAll('-', '_')}_c${o.clients}`;
  const systemDatabase = `${appDatabase}_sys`;
  const appDatabaseUrl = await server.freshDatabase(appDatabase);
  const systemDatabaseUrl = await server.freshDatabase(systemDatabase);
  const app = new pg.Client({ connectionString: appDatabaseUrl });
  await app.connect();
  await app.query(BENCH_APP_SQL).finally(() => app.end());
  const scratch = mkdtempSync(join(tmpdir(), 'ledgerflow-peers-'));
  const resultFile = join(scratch, 'result.json');
  const job = { workload: o.workload.id, systemDatabaseUrl, appDatabaseUrl, clients: o.clients, runs: o.runs, warmUp: o.warmUp, resultFile };
  try {
    const counters = async (): Promise<{ commits: number; rollbacks: number; walSyncs: number }> => {
      const [a, s] = [await readServerCounters(server.adminUrl, appDatabase), await readServerCounters(server.adminUrl, systemDatabase)];
      return { commits: a.commits + s.commits, rollbacks: a.rollbacks + s.rollbacks, walSyncs: await readWalSyncs(server.adminUrl) };
    };
    await runDbos({ ...job, mode: 'prepare' });
    // A second launch and shutdown with no workflow: what the commit count subtracts.
    const idle = await counters();
    await runDbos({ ...job, mode: 'prepare' });
    const before = await counters();
    await runDbos({ ...job, mode: 'measure' });
    const after = await counters();
    const result = JSON.parse(readFileSync(resultFile, 'utf8')) as { runs: number; seconds: number; charges: number };
    const countedRuns = o.runs + o.warmUp;
    if (o.workload.id === 'three-step') {
      await expectReservations(appDatabaseUrl, countedRuns, PEER);
      if (result.charges !== countedRuns) throw new Error(`${PEER}: ${countedRuns} three-step workflows made ${result.charges} provider charges`);
    }
    return endToEndRow(PEER, o.workload.label, o.clients, o.workload.stepsPerRun, {
      runs: result.runs,
      seconds: result.seconds,
      commits: after.commits - before.commits,
      rollbacks: after.rollbacks - before.rollbacks,
      walSyncs: after.walSyncs - before.walSyncs,
      countedRuns,
    }, { commits: before.commits - idle.commits, walSyncs: before.walSyncs - idle.walSyncs });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

function runDbos(job: Record<string, unknown>): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'dbos', 'end-to-end.ts')], {
      cwd: root,
      env: { ...process.env, LEDGERFLOW_PEERS_JOB: JSON.stringify(job) },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.on('error', reject);
    child.on('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`DBOS child (${String(job['mode'])} ${String(job['workload'])}) exited with ${signal ?? code}`)),
    );
  });
}

/** bench/peers/node_modules from bench/peers/package-lock.json, installed once. */
function ensurePeerInstalled(): void {
  if (existsSync(join(here, 'node_modules', '@dbos-inc', 'dbos-sdk', 'package.json'))) return;
  log('installing bench/peers dependencies (npm ci --prefix bench/peers)');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const installed = spawnSync(npm, ['ci', '--prefix', here, '--no-audit', '--no-fund'], { stdio: 'inherit' });
  if (installed.status !== 0) throw new Error('npm ci --prefix bench/peers failed; run it by hand to see why.');
}

function peerPackages(): string {
  const lock = JSON.parse(readFileSync(join(here, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
  return ['@dbos-inc/dbos-sdk', 'pg']
    .map((name) => `${name} ${lock.packages[`node_modules/${name}`]?.version ?? '?'}`)
    .concat('data source: bench/peers/dbos/pg-datasource.ts')
    .join(', ');
}

function writeResults(results: Parameters<typeof renderPeersMarkdown>[0]): void {
  const dir = join(root, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const day = results.environment.date.slice(0, 10);
  const series: ChartSeries[] = END_TO_END_WORKLOADS.flatMap((workload) =>
    ['ledgerflow', PEER].map((engine) => ({
      label: `${engine}, ${workload.id}`,
      points: results.rows
        .filter((r) => r.engine === engine && r.workload === workload.label)
        .map((r) => ({ concurrency: r.clients, value: r.workflowsPerSecond })),
    })),
  );
  const env = results.environment;
  const svg = renderChartSvg({
    title: `End to end, starts included: ledgerflow and ${PEER}`,
    subtitle: `${env.serverVersion}, fsync ${env.fsync}, ${env.cpuCount} CPUs, Node ${env.node} — ${day}`,
    yLabel: 'workflows per second',
    xLabel: 'clients (closed loop, one run in flight each)',
    series,
  });
  const png = renderChartPng(svg);
  for (const base of [`peers-${day}`, 'peers-latest']) {
    writeFileSync(join(dir, `${base}.svg`), svg);
    writeFileSync(join(dir, `${base}.png`), png);
    writeFileSync(join(dir, `${base}.md`), renderPeersMarkdown(results, `${base}.png`));
  }
  log(`wrote bench/results/peers-${day}.md, .svg, .png (and peers-latest.*)`);
}

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer (got "${raw}").`);
  return value;
}

function log(message: string): void {
  process.stderr.write(`[bench:peers] ${message}\n`);
}

await main();
