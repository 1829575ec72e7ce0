import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { countReservations, prepareBenchDatabase } from '../bench-database.js';
import { describeEnvironment, openBenchServer, type BenchServer } from '../environment.js';
import { expectExactlyOnce, type ProviderCounts } from '../exactly-once.js';
import { renderChartPng, renderChartSvg, type ChartSeries } from '../report/chart.js';
import { peersTable } from '../report/end-to-end.js';
import { renderPeersMarkdown, type PeersResults } from '../report/peers.js';
import type { EndToEndRow } from '../results-model.js';
import { readServerCounters, readWalSyncs, settleServer } from '../server-stats.js';
import { BENCH_APP_SQL } from '../workloads/bench-workflows.js';
import { END_TO_END_WORKLOADS, endToEndRow, type EndToEndWorkload } from '../workloads/end-to-end.js';
import { KEYED_APP_SQL, readResult, type PeerJob, type PeerResult } from './peer-job.js';
import { PEERS, type PeerDescription, type PeerId } from './peers.js';
import { summarisePeerCell } from './rounds.js';
import { rotated } from '../rounds.js';
import { startRestateServer } from './restate/server.js';

/**
 * `npm run bench:peers`: the end-to-end workloads (bench/workloads/end-to-end.ts) on ledgerflow
 * and on each peer (bench/peers/peers.ts: DBOS Transact, Restate, OpenWorkflow), closed loop, in
 * one run on one durable PostgreSQL server, each engine in databases of its own (Restate keeps its
 * state in a server of its own, started here per measurement); every measurement must pass the
 * exactly-once check (bench/exactly-once.ts). Writes bench/results/peers-latest.md (and a dated
 * copy) with a chart. Never part of `npm test`. Each peer runs in child processes
 * (bench/peers/<peer>/end-to-end.ts) whose modules come from bench/peers/<peer>/node_modules,
 * installed there with `npm ci` when missing, so the root package never depends on a peer;
 * ledgerflow too runs each measurement in a fresh child (bench/peers/ledgerflow-child.ts). Each
 * cell is measured in rounds, the server settled (a CHECKPOINT, autovacuum done) before every
 * measurement; see bench/peers/rounds.ts.
 *
 *   LEDGERFLOW_PEERS_N        timed workflows per measurement (default 400)
 *   LEDGERFLOW_PEERS_WARMUP   untimed workflows before each (default 200: V8 has compiled the hot path)
 *   LEDGERFLOW_PEERS_ROUNDS   rounds per cell, every engine once in each, order rotated (default 3)
 *   LEDGERFLOW_PEERS_ONLY     comma-separated peers to measure (dbos,restate,openworkflow; default all)
 *   LEDGERFLOW_PEERS_CLIENTS  comma-separated client counts (default 1,4,16)
 *   DATABASE_URL              use this server instead of starting one
 */
const here = dirname(fileURLToPath(import.meta.url));
const CHILD_TIMEOUT_MS = 300_000;
const root = join(here, '..', '..');

interface Measurement {
  readonly workload: EndToEndWorkload;
  readonly clients: number;
  readonly runs: number;
  readonly warmUp: number;
}

async function main(): Promise<void> {
  const runs = positiveInt('LEDGERFLOW_PEERS_N', 400);
  const warmUp = positiveInt('LEDGERFLOW_PEERS_WARMUP', 200);
  const rounds = positiveInt('LEDGERFLOW_PEERS_ROUNDS', 3);
  const clientCounts = list('LEDGERFLOW_PEERS_CLIENTS', ['1', '4', '16']).map((c) =>
    positiveIntValue('LEDGERFLOW_PEERS_CLIENTS', c),
  );
  const only = list(
    'LEDGERFLOW_PEERS_ONLY',
    PEERS.map((p) => p.id),
  );
  const peers = PEERS.filter((p) => only.includes(p.id));
  const unknown = only.filter((id) => !PEERS.some((p) => p.id === id));
  if (unknown.length > 0)
    throw new Error(
      `LEDGERFLOW_PEERS_ONLY names unknown peers (${unknown.join(', ')}); known: ${PEERS.map((p) => p.id).join(', ')}.`,
    );
  for (const peer of peers) ensureInstalled(peer);
  const started = performance.now();
  const loadAtStart = loadavg()[0] ?? 0;
  const server = await openBenchServer();
  try {
    const environment = await describeEnvironment(server);
    log(
      `server: ${environment.serverVersion}, fsync=${environment.fsync}, synchronous_commit=${environment.synchronousCommit}`,
    );
    const rows: EndToEndRow[] = [];
    const engines: Engine[] = [
      { name: 'ledgerflow', measure: ledgerflowMeasure(server) },
      ...peers.map((peer) => ({ name: peer.name, measure: (m: Measurement) => MEASURE[peer.id](server, peer, m) })),
    ];
    for (const workload of END_TO_END_WORKLOADS) {
      for (const clients of clientCounts) {
        const m = { workload, clients, runs, warmUp };
        const measured: EndToEndRow[][] = [];
        for (let round = 0; round < rounds; round++) {
          const row: EndToEndRow[] = [];
          for (const engine of rotated(engines, round)) {
            const waited = await settleServer(server.adminUrl);
            if (waited > 1000) log(`waited ${(waited / 1000).toFixed(1)} s for autovacuum before ${engine.name}`);
            row.push(await engine.measure(m));
          }
          measured.push(engines.map((e) => row.find((r) => r.engine === e.name)!));
          log(`${workload.id} c=${clients} round ${round + 1}/${rounds}: ${roundLine(measured.at(-1)!)}`);
        }
        rows.push(...summarisePeerCell(measured));
      }
    }
    const results: PeersResults = {
      environment,
      peers: peers.map((peer) => ({ ...peer, versions: installedVersions(peer) })),
      totalSeconds: (performance.now() - started) / 1000,
      loadAverage: [loadAtStart, loadavg()[0] ?? 0] as const,
      sizes:
        `Each measurement times ${runs} workflows after ${warmUp} untimed ones (LEDGERFLOW_PEERS_N, LEDGERFLOW_PEERS_WARMUP). ` +
        `Every cell was measured in ${rounds} round${rounds === 1 ? '' : 's'} (LEDGERFLOW_PEERS_ROUNDS): in each, every engine once, back to back, ` +
        'the order rotated from round to round; a ratio is taken within each round (a slow minute of the machine falls on ' +
        "neighbours) and shown as the median with the lowest and highest; an engine's other figures are those of its median " +
        'round by workflows/s. The clients, the engines and the server share this machine.',
      rows,
    };
    process.stdout.write(
      `${peersTable(
        rows,
        peers.map((p) => p.name),
      )}\n`,
    );
    writeResults(results);
  } finally {
    await server.close();
  }
}

type Measure = (server: BenchServer, peer: PeerDescription, m: Measurement) => Promise<EndToEndRow>;

/** An engine of the comparison and how one cell is measured on it. */
interface Engine {
  readonly name: string;
  readonly measure: (m: Measurement) => Promise<EndToEndRow>;
}

/**
 * ledgerflow in a child process of its own (bench/peers/ledgerflow-child.ts), fresh for each
 * measurement as each peer's is, on a database prepared here (migrated, with the application table).
 */
function ledgerflowMeasure(server: BenchServer): Engine['measure'] {
  return async (m) => {
    const database = `bench_e2e_${suffix(m)}`;
    const { url } = await prepareBenchDatabase(server, database);
    const child = { name: 'ledgerflow', script: join(here, 'ledgerflow-child.ts') };
    const result = await runJob(child, {
      workload: m.workload.id,
      appDatabaseUrl: url,
      database,
      statsUrl: server.adminUrl,
      ...sizes(m),
    });
    await checkEffects(child.name, m, url, result.provider);
    const counted = result.counted;
    if (!counted) throw new Error('the ledgerflow child wrote no counts');
    return endToEndRow(
      'ledgerflow',
      m.workload.label,
      m.clients,
      m.workload.stepsPerRun,
      counted.measurement,
      counted.lifecycle,
    );
  };
}

/** A round's workflows/s, and ledgerflow's ratio to each peer in it. */
function roundLine(row: readonly EndToEndRow[]): string {
  const ours = row.find((r) => r.engine === 'ledgerflow')!;
  return row
    .map((r) =>
      r === ours
        ? `ledgerflow ${r.workflowsPerSecond.toFixed(0)}`
        : `${r.engine} ${r.workflowsPerSecond.toFixed(0)} (${(ours.workflowsPerSecond / r.workflowsPerSecond).toFixed(2)} ×)`,
    )
    .join(', ');
}

const MEASURE: Record<PeerId, Measure> = {
  /** A fresh application and system database, prepared by one child and measured by the next. */
  dbos: (server, peer, m) => measureOnPostgres(server, peer, m, BENCH_APP_SQL),
  /** A fresh backend database, migrated by one child and measured by the next. */
  openworkflow: (server, peer, m) => measureOnPostgres(server, peer, m, `${BENCH_APP_SQL}${KEYED_APP_SQL}`),
  /** A fresh Restate server for the measurement; PostgreSQL holds only the application rows. */
  restate: async (server, peer, m) => {
    const appDatabaseUrl = await appDatabase(server, `bench_restate_${suffix(m)}`, `${BENCH_APP_SQL}${KEYED_APP_SQL}`);
    const restate = await startRestateServer();
    try {
      const result = await runJob(peerScript(peer), {
        workload: m.workload.id,
        appDatabaseUrl,
        ingressUrl: restate.ingressUrl,
        adminUrl: restate.adminUrl,
        ...sizes(m),
      });
      await checkEffects(peer.name, m, appDatabaseUrl, result.provider);
      const notCounted = { commits: Number.NaN, rollbacks: 0, walSyncs: Number.NaN };
      return endToEndRow(
        peer.name,
        m.workload.label,
        m.clients,
        m.workload.stepsPerRun,
        { ...notCounted, runs: result.runs, seconds: result.seconds, countedRuns: m.runs + m.warmUp },
        notCounted,
      );
    } finally {
      await restate.stop();
    }
  },
};

/**
 * A peer that keeps its state in PostgreSQL: its system database and the application database,
 * fresh; a `prepare` child creates its schema, a second one measures the start-up and shutdown
 * the commit counts subtract, then the `measure` child runs the closed loop.
 */
async function measureOnPostgres(
  server: BenchServer,
  peer: PeerDescription,
  m: Measurement,
  appSql: string,
): Promise<EndToEndRow> {
  const appName = `bench_${peer.id}_${suffix(m)}`;
  const systemName = `${appName}_sys`;
  const appDatabaseUrl = await appDatabase(server, appName, appSql);
  const systemDatabaseUrl = await server.freshDatabase(systemName);
  const counters = async (): Promise<{ commits: number; rollbacks: number; walSyncs: number }> => {
    const [a, s] = [
      await readServerCounters(server.adminUrl, appName),
      await readServerCounters(server.adminUrl, systemName),
    ];
    return {
      commits: a.commits + s.commits,
      rollbacks: a.rollbacks + s.rollbacks,
      walSyncs: await readWalSyncs(server.adminUrl),
    };
  };
  const job = { workload: m.workload.id, appDatabaseUrl, systemDatabaseUrl, ...sizes(m) };
  const script = peerScript(peer);
  await runJob(script, { ...job, mode: 'prepare' });
  const idle = await counters();
  await runJob(script, { ...job, mode: 'prepare' });
  const before = await counters();
  const result = await runJob(script, job);
  const after = await counters();
  await checkEffects(peer.name, m, appDatabaseUrl, result.provider);
  return endToEndRow(
    peer.name,
    m.workload.label,
    m.clients,
    m.workload.stepsPerRun,
    {
      runs: result.runs,
      seconds: result.seconds,
      commits: after.commits - before.commits,
      rollbacks: after.rollbacks - before.rollbacks,
      walSyncs: after.walSyncs - before.walSyncs,
      countedRuns: m.runs + m.warmUp,
    },
    { commits: before.commits - idle.commits, walSyncs: before.walSyncs - idle.walSyncs },
  );
}

/** Fails the run unless the engine wrote one row and made one charge per workflow (bench/exactly-once.ts). */
async function checkEffects(
  engine: string,
  m: Measurement,
  appDatabaseUrl: string,
  provider: ProviderCounts,
): Promise<void> {
  expectExactlyOnce(engine, {
    workload: m.workload.id,
    workflows: m.runs + m.warmUp,
    reservations: await countReservations(appDatabaseUrl),
    provider,
  });
}

async function appDatabase(server: BenchServer, name: string, sql: string): Promise<string> {
  const url = await server.freshDatabase(name);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(sql).finally(() => client.end());
  return url;
}

function suffix(m: Measurement): string {
  return `${m.workload.id.replaceAll('-', '_')}_c${m.clients}`;
}

function sizes(m: Measurement): Pick<PeerJob, 'clients' | 'runs' | 'warmUp'> {
  return { clients: m.clients, runs: m.runs, warmUp: m.warmUp };
}

/** A script run in a child process by {@link runJob}. */
interface ChildScript {
  readonly name: string;
  readonly script: string;
  readonly env?: Readonly<Record<string, string>> | undefined;
}

function peerScript(peer: PeerDescription): ChildScript {
  return { name: peer.name, script: join(here, peer.folder, 'end-to-end.ts'), env: peer.env };
}

/** Runs a child script (bench/peers/<peer>/end-to-end.ts, bench/peers/ledgerflow-child.ts) on one job (measure unless told otherwise) and returns what it wrote. */
async function runJob(
  engine: ChildScript,
  job: Omit<PeerJob, 'mode' | 'resultFile'> & { mode?: PeerJob['mode'] },
): Promise<PeerResult> {
  const scratch = mkdtempSync(join(tmpdir(), 'ledgerflow-peers-'));
  const full: PeerJob = { mode: 'measure', ...job, resultFile: join(scratch, 'result.json') };
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, ['--conditions=ledgerflow-source', '--import', 'tsx', engine.script], {
        cwd: root,
        env: { ...process.env, ...engine.env, LEDGERFLOW_PEERS_JOB: JSON.stringify(full) },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      // A workflow that fails forever is retried forever by some engines: give up, loudly.
      const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
      child.on('error', reject);
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) resolve();
        else
          reject(
            new Error(
              `${engine.name} child (${full.mode} ${full.workload} c=${full.clients}) exited with ${signal ?? code}${signal === 'SIGKILL' ? ` (killed after ${CHILD_TIMEOUT_MS / 1000} s)` : ''}`,
            ),
          );
      });
    });
    return full.mode === 'measure'
      ? readResult(full.resultFile)
      : { runs: 0, seconds: 0, provider: { charges: 0, chargedKeys: 0, requests: 0 } };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** bench/peers/<peer>/node_modules from its package-lock.json, installed once. */
function ensureInstalled(peer: PeerDescription): void {
  const folder = join(here, peer.folder);
  if (peer.packages.every((name) => existsSync(join(folder, 'node_modules', name, 'package.json')))) return;
  log(`installing ${peer.name} (npm ci --prefix bench/peers/${peer.folder})`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const installed = spawnSync(npm, ['ci', '--prefix', folder, '--no-audit', '--no-fund'], { stdio: 'inherit' });
  if (installed.status !== 0)
    throw new Error(`npm ci --prefix bench/peers/${peer.folder} failed; run it by hand to see why.`);
}

function installedVersions(peer: PeerDescription): string {
  const lock = JSON.parse(readFileSync(join(here, peer.folder, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string }>;
  };
  return peer.packages.map((name) => `${name} ${lock.packages[`node_modules/${name}`]?.version ?? '?'}`).join(', ');
}

function writeResults(results: PeersResults): void {
  const dir = join(root, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const day = results.environment.date.slice(0, 10);
  const engines = ['ledgerflow', ...results.peers.map((p) => p.name)];
  const series: ChartSeries[] = END_TO_END_WORKLOADS.flatMap((workload) =>
    engines.map((engine) => ({
      label: `${engine}, ${workload.id}`,
      points: results.rows
        .filter((r) => r.engine === engine && r.workload === workload.label)
        .map((r) => ({ concurrency: r.clients, value: r.workflowsPerSecond })),
    })),
  );
  const env = results.environment;
  const svg = renderChartSvg({
    title: `End to end, closed loop: ledgerflow and ${results.peers.map((p) => p.name).join(', ')}`,
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

function list(name: string, fallback: readonly string[]): string[] {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return [...fallback];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  return raw === undefined || raw === '' ? fallback : positiveIntValue(name, raw);
}

function positiveIntValue(name: string, raw: string): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer (got "${raw}").`);
  return value;
}

function log(message: string): void {
  process.stderr.write(`[bench:peers] ${message}\n`);
}

await main();
