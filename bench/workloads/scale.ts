import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { WorkflowRegistration } from '../../runtime/index.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { claimStatement } from '../../runtime/worker/claim.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { fillScaleBacklog } from '../../tests/support/scale-backlog.js';
import { migrateForTest } from '../../tests/support/migrate-for-test.js';
import type { BenchServer } from '../environment.js';
import { BENCH_WORKFLOWS, latencyProbe, plainOnly } from './bench-workflows.js';
import { measureFleetThroughput, type FleetThroughput } from './fleet.js';

/**
 * Scale workloads:
 * - claim latency over a growing backlog: the claim of one run (the worker's claim statement,
 *   limit 1, autocommit) timed at 1 000, 100 000 and 1 000 000 unfinished runs (the plan test's
 *   mix, tests/support/scale-backlog.ts), built up in one database: median of `claims` claims;
 * - throughput of several worker processes on one database: N one-step (W1) runs drained by 1
 *   process and by 4, timed by the database from their release to the last completion
 *   (bench/workloads/fleet.ts; `npm run bench:ceiling` goes on to 8 processes and three steps).
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
