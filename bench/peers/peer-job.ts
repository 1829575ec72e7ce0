import { readFileSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { ProviderCounts } from '../exactly-once.js';
import type { EndToEndMeasurement } from '../workloads/end-to-end.js';

/**
 * What bench/peers/main.ts hands a peer's child process (bench/peers/<peer>/end-to-end.ts), as
 * JSON in LEDGERFLOW_PEERS_JOB, and what the child writes back to `resultFile`. The children
 * import nothing of ledgerflow's runtime and resolve their engine from their own folder's
 * node_modules.
 *
 *   prepare  create the engine's schema (where it has one), start and stop the engine
 *   measure  start the engine in this process; `clients` clients each start a workflow and wait
 *            for its result, then start the next, `warmUp` untimed and `runs` timed; stop; write
 *            a {@link PeerResult}
 */
export interface PeerJob {
  readonly mode: 'prepare' | 'measure';
  readonly workload: 'one-step' | 'three-step';
  /** The database the three-step workflow writes its row into (bench_app.reservation). */
  readonly appDatabaseUrl: string;
  /** The engine's own database, for the peers that keep their state in PostgreSQL. */
  readonly systemDatabaseUrl?: string;
  /** Restate: its ingress and admin API (the server started by bench/peers/restate/server.ts). */
  readonly ingressUrl?: string;
  readonly adminUrl?: string;
  /** ledgerflow (bench/peers/ledgerflow-child.ts): its database's name, and a superuser URL to read its counters with. */
  readonly database?: string;
  readonly statsUrl?: string;
  readonly clients: number;
  readonly runs: number;
  readonly warmUp: number;
  readonly resultFile: string;
}

export interface PeerResult {
  readonly runs: number;
  readonly seconds: number;
  /** What the in-process provider saw over the whole measurement, warm-up included. */
  readonly provider: ProviderCounts;
  /** ledgerflow's own counts (bench/workloads/end-to-end.ts): the measurement, and a start-up and shutdown with no run. */
  readonly counted?: { readonly measurement: EndToEndMeasurement; readonly lifecycle: EndToEndMeasurement };
}

/** The job of this child process; throws when it was not started by bench/peers/main.ts. */
export function readJob(): PeerJob {
  const raw = process.env['LEDGERFLOW_PEERS_JOB'];
  if (!raw)
    throw new Error(
      'LEDGERFLOW_PEERS_JOB is not set: this script is run by bench/peers/main.ts (npm run bench:peers).',
    );
  return JSON.parse(raw) as PeerJob;
}

/** Option `name` of a job, which the peer cannot run without. */
export function required(
  job: PeerJob,
  name: 'systemDatabaseUrl' | 'ingressUrl' | 'adminUrl' | 'database' | 'statsUrl',
): string {
  const value = job[name];
  if (!value) throw new Error(`LEDGERFLOW_PEERS_JOB has no ${name}: bench/peers/main.ts gives it to this peer.`);
  return value;
}

/**
 * The closed loop every engine is measured with: `clients` loops, each starting workflow i and
 * waiting for its result (`startAndWait`) before taking the next i; warm-up first, untimed.
 */
export async function measureClosedLoop(job: PeerJob, startAndWait: (i: number) => Promise<void>): Promise<number> {
  const closedLoop = async (from: number, to: number): Promise<void> => {
    let next = from;
    const loop = async (): Promise<void> => {
      for (let i = next++; i < to; i = next++) await startAndWait(i);
    };
    await Promise.all(Array.from({ length: job.clients }, loop));
  };
  await closedLoop(0, job.warmUp);
  const started = performance.now();
  await closedLoop(job.warmUp, job.warmUp + job.runs);
  return (performance.now() - started) / 1000;
}

export function writeResult(job: PeerJob, result: PeerResult): void {
  writeFileSync(job.resultFile, JSON.stringify(result));
}

export function readResult(file: string): PeerResult {
  return JSON.parse(readFileSync(file, 'utf8')) as PeerResult;
}

/**
 * The three-step workflow's application write on an engine whose step cannot share the
 * write's transaction: the row keyed by the workflow id (a unique index, {@link KEYED_APP_SQL}),
 * so that a step run again after a crash between the row's commit and the engine's checkpoint
 * finds the row instead of writing a second one. One statement when nothing conflicts.
 */
export async function reserveOnce(
  query: (text: string, values: readonly unknown[]) => Promise<{ rows: readonly { id: string }[] }>,
  workflowId: string,
  i: number,
): Promise<{ reservationId: number }> {
  const inserted = await query(
    'INSERT INTO bench_app.reservation (run_id, item) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING RETURNING id',
    [workflowId, i],
  );
  const row =
    inserted.rows[0] ?? (await query('SELECT id FROM bench_app.reservation WHERE run_id = $1', [workflowId])).rows[0];
  if (!row) throw new Error(`reservation of workflow ${workflowId} neither inserted nor found`);
  return { reservationId: Number(row.id) };
}

/** The unique key {@link reserveOnce} relies on, added to the application table of those peers. */
export const KEYED_APP_SQL = 'CREATE UNIQUE INDEX IF NOT EXISTS reservation_run_id ON bench_app.reservation (run_id);';
