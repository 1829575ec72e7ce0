import { spawn, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { AnyWorkflow } from '../../dsl/index.js';
import { RUNS_CHANNEL } from '../../runtime/store/channels.js';
import type { BenchServer } from '../environment.js';
import { prepareBenchDatabase } from '../bench-database.js';
import { readServerCounters } from '../server-stats.js';
import { machineCpu, processCpuSeconds, serverCpuSeconds, type MachineCpu } from './process-cpu.js';
import { oneStep } from './bench-workflows.js';

/**
 * Several worker processes draining one backlog on one database: `runs` runs of `workflow`,
 * inserted not due (run_after = 'infinity'); once every worker process has started they are
 * released in one statement (and a NOTIFY wakes the workers), and the time is the database's:
 * from that statement to the last run's finished_at. Worker start-up is not timed. Used by the
 * scale line of `npm run bench` and by `npm run bench:ceiling`.
 */
export interface FleetThroughput {
  readonly workflow: string;
  readonly processes: number;
  /** Each process's `concurrency`; undefined: the worker's default. */
  readonly concurrencyEach: number | undefined;
  readonly runs: number;
  readonly steps: number;
  readonly seconds: number;
  readonly workflowsPerSecond: number;
  readonly stepsPerSecond: number;
  /** Server commits per workflow (`pg_stat_database`), the workers' start-up and stop included, the bench's own reads taken off. */
  readonly commitsPerWorkflow: number;
  /** CPU over the drain (release to the last completion seen), when the server's processes can be read (a local server). */
  readonly cpu?: FleetCpu;
}

/** CPU seconds spent during the drain, and the wall seconds they were spent in. */
export interface FleetCpu {
  readonly wallSeconds: number;
  /** The PostgreSQL server: postmaster, backends (live and ended), background processes. */
  readonly serverSeconds: number;
  /** The worker processes together. */
  readonly workersSeconds: number;
  /** The whole machine, from /proc/stat. */
  readonly machine: MachineCpu;
}

const WORKER_ENTRY = fileURLToPath(new URL('./scale-worker.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export async function measureFleetThroughput(
  server: BenchServer,
  o: {
    readonly processes: number;
    readonly concurrencyEach?: number;
    readonly runs: number;
    /** Default: the one-step workflow (W1). */
    readonly workflow?: AnyWorkflow;
    /** The server's postmaster pid, to read its CPU (see `serverCpuSeconds`). */
    readonly postmasterPid?: number;
  },
): Promise<FleetThroughput> {
  const workflow = o.workflow ?? oneStep;
  const label = `${workflow.name.replaceAll('-', '_')}_p${o.processes}_c${o.concurrencyEach ?? 'default'}`;
  const { url, name } = await prepareBenchDatabase(server, `bench_fleet_${label}`);
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  try {
    await setup.query(
      `INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, run_after)
       SELECT gen_random_uuid(), $1, $2, jsonb_build_object('i', g), 'infinity' FROM generate_series(1, $3::int) AS g`,
      [workflow.name, workflow.version, o.runs],
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
  let cpu: FleetCpu | undefined;
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
          SCALE_CONCURRENCY: o.concurrencyEach === undefined ? '' : String(o.concurrencyEach),
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
            reject(new Error(`fleet worker p${p} exited (${code}) before it was ready: ${stderr}`)),
          );
        }),
      );
    }
    await Promise.all(ready);
    const sample = () => ({
      at: performance.now(),
      server: o.postmasterPid === undefined ? undefined : serverCpuSeconds(o.postmasterPid),
      workers: children.reduce((sum, child) => sum + processCpuSeconds(child.pid!), 0),
      machine: machineCpu(),
    });
    const start = sample();
    const { rows } = await query<{ released: Date; n: number }>(
      `WITH released AS (
         UPDATE ledgerflow.workflow_run SET run_after = statement_timestamp() WHERE status = 'pending' AND workflow_name = $1 RETURNING 1
       )
       SELECT statement_timestamp() AS released, count(*)::int AS n FROM released`,
      [workflow.name],
    );
    if (rows[0]!.n !== o.runs) throw new Error(`fleet: released ${rows[0]!.n} runs, not ${o.runs}`);
    await query(`SELECT pg_notify($1, '')`, [RUNS_CHANNEL]);
    const released = rows[0]!.released;
    const deadline = performance.now() + 300_000;
    for (;;) {
      const { rows: done } = await query<{ completed: number; failed: number }>(
        `SELECT count(*) FILTER (WHERE status = 'completed')::int AS completed,
                count(*) FILTER (WHERE status IN ('failed', 'cancelled'))::int AS failed
           FROM ledgerflow.workflow_run WHERE workflow_name = $1`,
        [workflow.name],
      );
      const { completed, failed } = done[0]!;
      if (failed > 0) throw new Error(`fleet: ${failed} runs failed in the fleet drain`);
      if (completed === o.runs) break;
      if (performance.now() > deadline) throw new Error(`fleet: drain timed out with ${completed}/${o.runs} completed`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const end = sample();
    if (start.server !== undefined && end.server !== undefined) {
      cpu = {
        wallSeconds: (end.at - start.at) / 1000,
        serverSeconds: end.server - start.server,
        workersSeconds: end.workers - start.workers,
        machine: {
          busySeconds: end.machine.busySeconds - start.machine.busySeconds,
          idleSeconds: end.machine.idleSeconds - start.machine.idleSeconds,
        },
      };
    }
    const { rows: span } = await query<{ seconds: number }>(
      `SELECT extract(epoch FROM max(finished_at) - $1::timestamptz)::float8 AS seconds FROM ledgerflow.workflow_run WHERE workflow_name = $2`,
      [released, workflow.name],
    );
    seconds = span[0]!.seconds;
  } finally {
    await Promise.all(children.map(stopChild));
    await client.end().catch(() => {});
  }
  const after = await readServerCounters(server.adminUrl, name);
  const steps = o.runs * workflow.steps.length;
  return {
    workflow: workflow.name,
    processes: o.processes,
    concurrencyEach: o.concurrencyEach,
    runs: o.runs,
    steps,
    seconds,
    workflowsPerSecond: o.runs / seconds,
    stepsPerSecond: steps / seconds,
    commitsPerWorkflow: (after.commits - before.commits - ownCommits) / o.runs,
    ...(cpu === undefined ? {} : { cpu }),
  };
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
