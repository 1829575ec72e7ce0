import { spawn, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { WorkflowRegistration } from '../../runtime/index.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { claimStatement } from '../../runtime/worker/claim.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { RUNS_CHANNEL } from '../../runtime/store/channels.js';
import { fillScaleBacklog } from '../../tests/support/scale-backlog.js';
import { migrateForTest } from '../../tests/support/migrate-for-test.js';
import type { BenchServer } from '../environment.js';
import { prepareBenchDatabase } from '../bench-database.js';
import { readServerCounters } from '../server-stats.js';
import { BENCH_WORKFLOWS, latencyProbe, oneStep, plainOnly } from './bench-workflows.js';

/**
 * Scale workloads:
 * - claim latency over a growing backlog: the claim of one run (the worker's claim statement,
 *   limit 1, autocommit) timed at 1 000, 100 000 and 1 000 000 unfinished runs (the plan test's
 *   mix, tests/support/scale-backlog.ts), built up in one database: median of `claims` claims;
 * - throughput of several worker processes on one database: N one-step (W1) runs drained by 1
 *   process and by 4, timed by the database from their release to the last completion.
 */

export interface ClaimLatencyPoint {
  readonly backlog: number;
  readonly medianMs: number;
  readonly p90Ms: number;
}

/**
 * Claim latency at each backlog size in `sizes` (ascending). The claims commit with
 * `synchronous_commit = off` on their session, so that what is timed is the statement and not the
 * WAL flush (the same for every size); each claimed run stays leased for an hour.
 */
export async function measureClaimLatency(
  server: BenchServer,
  o: {
    readonly sizes: readonly number[];
    readonly claims: number;
    readonly registrations: readonly WorkflowRegistration[];
    readonly log: (line: string) => void;
  },
): Promise<ClaimLatencyPoint[]> {
  const url = await server.freshDatabase('bench_scale_claim');
  const store = createPgStore({ connectionString: url, maxConnections: 2 });
  const client = new pg.Client({ connectionString: url });
  try {
    await migrateForTest(store, [...BENCH_WORKFLOWS]);
    // The claiming worker runs plainOnly; latencyProbe's due runs are another worker's.
    const registry = buildRegistry(o.registrations.filter((r) => r.workflow.name === plainOnly.name));
    const compiled = claimStatement(registry, { workerId: 'bench-scale', leaseMs: 3_600_000, limit: 1 }).compile(
      store.db,
    );
    await client.connect();
    await client.query('SET synchronous_commit TO off');
    const points: ClaimLatencyPoint[] = [];
    let filled = 0;
    for (const size of o.sizes) {
      const started = performance.now();
      await fillScaleBacklog(store.db, { from: filled, to: size, registered: plainOnly, other: latencyProbe });
      filled = size;
      o.log(`scale: backlog of ${size} runs built in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      const times: number[] = [];
      for (let i = 0; i < o.claims + 20; i++) {
        const t0 = performance.now();
        const { rowCount } = await client.query(compiled.sql, [...compiled.parameters]);
        const ms = performance.now() - t0;
        if (rowCount !== 1) throw new Error(`scale: a claim over ${size} runs took ${rowCount} runs, not 1`);
        if (i >= 20) times.push(ms);
      }
      times.sort((a, b) => a - b);
      points.push({
        backlog: size,
        medianMs: times[Math.floor(times.length / 2)]!,
        p90Ms: times[Math.floor(times.length * 0.9)]!,
      });
    }
    return points;
  } finally {
    await client.end().catch(() => {});
    await store.close();
  }
}

export interface FleetThroughput {
  readonly processes: number;
  readonly concurrencyEach: number;
  readonly runs: number;
  readonly seconds: number;
  readonly workflowsPerSecond: number;
  /** Server commits per workflow (`pg_stat_database`), the workers' start-up and stop included, the bench's own reads taken off. */
  readonly commitsPerWorkflow: number;
}

const WORKER_ENTRY = fileURLToPath(new URL('./scale-worker.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * `runs` W1 runs drained by `processes` worker processes of `concurrencyEach` each. The runs are
 * inserted not due (run_after = 'infinity'); once every worker has started they are released in
 * one statement (and a NOTIFY wakes the workers), and the time is the database's: from that
 * statement to the last run's finished_at. Worker start-up is not timed.
 */
export async function measureFleetThroughput(
  server: BenchServer,
  o: { readonly processes: number; readonly concurrencyEach: number; readonly runs: number },
): Promise<FleetThroughput> {
  const { url, name } = await prepareBenchDatabase(server, `bench_scale_fleet_p${o.processes}_c${o.concurrencyEach}`);
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  try {
    await setup.query(
      `INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, run_after)
       SELECT gen_random_uuid(), $1, $2, jsonb_build_object('i', g), 'infinity' FROM generate_series(1, $3::int) AS g`,
      [oneStep.name, oneStep.version, o.runs],
    );
    await setup.query('VACUUM ANALYZE ledgerflow.workflow_run');
  } finally {
    await setup.end();
  }
  const before = await readServerCounters(server.adminUrl, name);
  // Every statement this client sends is a commit of its own, counted here and taken off.
  let ownCommits = 0;
  const client = new pg.Client({ connectionString: url });
  const query = <R extends pg.QueryResultRow>(text: string, values: unknown[]) => {
    ownCommits += 1;
    return client.query<R>(text, values);
  };
  const children: ChildProcess[] = [];
  let seconds: number;
  try {
    await client.connect();
    const ready: Promise<void>[] = [];
    for (let p = 0; p < o.processes; p++) {
      const child = spawn(process.execPath, ['--conditions=ledgerflow-source', '--import', 'tsx', WORKER_ENTRY], {
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          DATABASE_URL: url,
          SCALE_WORKER_NAME: `p${p}`,
          SCALE_CONCURRENCY: String(o.concurrencyEach),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
      ready.push(
        new Promise<void>((resolve, reject) => {
          child.stdout!.on('data', (chunk: Buffer) => {
            if (chunk.toString().includes('ready')) resolve();
          });
          child.once('exit', (code) =>
            reject(new Error(`scale worker p${p} exited (${code}) before it was ready: ${stderr}`)),
          );
        }),
      );
    }
    await Promise.all(ready);
    const { rows } = await query<{ released: Date; n: number }>(
      `WITH released AS (
         UPDATE ledgerflow.workflow_run SET run_after = statement_timestamp() WHERE status = 'pending' AND workflow_name = $1 RETURNING 1
       )
       SELECT statement_timestamp() AS released, count(*)::int AS n FROM released`,
      [oneStep.name],
    );
    if (rows[0]!.n !== o.runs) throw new Error(`scale: released ${rows[0]!.n} runs, not ${o.runs}`);
    await query(`SELECT pg_notify($1, '')`, [RUNS_CHANNEL]);
    const released = rows[0]!.released;
    const deadline = performance.now() + 300_000;
    for (;;) {
      const { rows: done } = await query<{ completed: number; failed: number }>(
        `SELECT count(*) FILTER (WHERE status = 'completed')::int AS completed,
                count(*) FILTER (WHERE status IN ('failed', 'cancelled'))::int AS failed
           FROM ledgerflow.workflow_run WHERE workflow_name = $1`,
        [oneStep.name],
      );
      const { completed, failed } = done[0]!;
      if (failed > 0) throw new Error(`scale: ${failed} runs failed in the fleet drain`);
      if (completed === o.runs) break;
      if (performance.now() > deadline)
        throw new Error(`scale: fleet drain timed out with ${completed}/${o.runs} completed`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const { rows: span } = await query<{ seconds: number }>(
      `SELECT extract(epoch FROM max(finished_at) - $1::timestamptz)::float8 AS seconds FROM ledgerflow.workflow_run WHERE workflow_name = $2`,
      [released, oneStep.name],
    );
    seconds = span[0]!.seconds;
  } finally {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
            child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            child.kill('SIGTERM');
          }),
      ),
    );
    await client.end().catch(() => {});
  }
  const after = await readServerCounters(server.adminUrl, name);
  return {
    processes: o.processes,
    concurrencyEach: o.concurrencyEach,
    runs: o.runs,
    seconds,
    workflowsPerSecond: o.runs / seconds,
    commitsPerWorkflow: (after.commits - before.commits - ownCommits) / o.runs,
  };
}

export interface ScaleResults {
  readonly claimLatency: readonly ClaimLatencyPoint[];
  readonly fleets: readonly FleetThroughput[];
}

/** Both scale lines, logged: claim latency as a ratio to the smallest backlog, fleets as a ratio to one process. */
export async function measureScale(
  server: BenchServer,
  o: {
    readonly runs: number;
    readonly maxBacklog: number;
    readonly registrations: readonly WorkflowRegistration[];
    readonly log: (line: string) => void;
  },
): Promise<ScaleResults> {
  const sizes = [1_000, 100_000, 1_000_000].filter((size) => size < o.maxBacklog);
  sizes.push(o.maxBacklog);
  const claimLatency = await measureClaimLatency(server, {
    sizes,
    claims: 200,
    registrations: o.registrations,
    log: o.log,
  });
  const base = claimLatency[0]!;
  for (const p of claimLatency) {
    o.log(
      `scale: claim of one run over ${p.backlog} unfinished runs: median ${p.medianMs.toFixed(3)} ms (${(p.medianMs / base.medianMs).toFixed(2)} × ${base.backlog}), p90 ${p.p90Ms.toFixed(3)} ms`,
    );
  }
  const fleets: FleetThroughput[] = [];
  for (const [processes, concurrencyEach] of [
    [1, 16],
    [4, 4],
    [4, 16],
  ] as const) {
    const f = await measureFleetThroughput(server, { processes, concurrencyEach, runs: o.runs });
    fleets.push(f);
    o.log(
      `scale: W1 drain of ${f.runs} runs by ${processes} worker process(es) × concurrency ${concurrencyEach}: ${f.workflowsPerSecond.toFixed(0)} workflows/s, ` +
        `${f.commitsPerWorkflow.toFixed(2)} commits/workflow` +
        (fleets.length > 1
          ? ` (${(f.workflowsPerSecond / fleets[0]!.workflowsPerSecond).toFixed(2)} × 1 process)`
          : ''),
    );
  }
  return { claimLatency, fleets };
}
