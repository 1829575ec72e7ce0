import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { z } from 'zod';
import { shapeHash, workflow, type AnyWorkflow } from '../../dsl/index.js';
import { createClient } from '../../runtime/client/client.js';
import { bindHandlers, createWorker, type Store, type WorkflowRegistration } from '../../runtime/index.js';
import { claimStatement } from '../../runtime/worker/claim.js';
import { buildRegistry } from '../../runtime/worker/registry.js';

/**
 * Workloads of the steps that wait and compose:
 * - what 100 000 sleeping runs cost the claim (they must cost rows, not claim time), and
 * - how fast a `forEach` starts 10 000 children, against `client.start` in a loop and a bare
 *   `INSERT … SELECT generate_series` of the same rows, measured in the same run.
 */
const input = z.object({ i: z.number().int().nonnegative() });

/** A plain one-step workflow: the drained runs, and what sleeps. */
export const napOne = workflow('bench-nap', { version: 1, input })
  .sleep('nap', { for: () => 86_400_000 })
  .step('after', { output: z.object({ ok: z.boolean() }) });

export const fanChild = workflow('bench-fan-child', { version: 1, input }).step('noop', {
  output: z.object({ i: z.number() }),
});

export const fanParent = workflow('bench-fan-parent', {
  version: 1,
  input: z.object({ count: z.number().int() }),
}).forEach('children', {
  items: ({ input }) => Array.from({ length: input.count }, (_, i) => i),
  key: ({ item }) => `fan:${item}`,
  workflow: fanChild,
  input: ({ item }) => ({ i: item }),
});

export const WAIT_BENCH_WORKFLOWS = [napOne, fanChild, fanParent];

export function waitBenchRegistrations(): WorkflowRegistration[] {
  return [
    bindHandlers(napOne, { after: () => ({ ok: true }) }, shapeHash(napOne)),
    bindHandlers(fanChild, { noop: ({ input }) => ({ i: input.i }) }, shapeHash(fanChild)),
    bindHandlers(fanParent, {}, shapeHash(fanParent)),
  ];
}

export interface SleepingClaimCost {
  readonly sleeping: number;
  /**
   * Mean time of a claim statement that finds nothing due: without the sleeping runs, with them
   * right after they were parked, and with them after a VACUUM.
   */
  readonly emptyClaimMs: { readonly without: number; readonly with: number; readonly vacuumed: number };
  /** Runs per second a worker drains (plain one-step runs), in the same three states. */
  readonly drainRunsPerSecond: { readonly without: number; readonly with: number; readonly vacuumed: number };
}

/**
 * Measures the claim on `store` twice: before and after `sleeping` runs are put to sleep for a
 * day. The sleepers are real: started through the client and parked by a worker.
 */
export async function measureSleepingClaimCost(
  store: Store,
  o: {
    readonly sleeping: number;
    readonly drainRuns: number;
    readonly drainWorkflow: AnyWorkflow;
    readonly registrations: readonly WorkflowRegistration[];
  },
): Promise<SleepingClaimCost> {
  const emptyClaim = async (): Promise<number> => {
    const registry = buildRegistry([...o.registrations]);
    const statement = claimStatement(registry, { workerId: 'bench-empty', leaseMs: 30_000, limit: 16 });
    for (let i = 0; i < 50; i++) await statement.execute(store.db); // warm
    const started = performance.now();
    const rounds = 500;
    for (let i = 0; i < rounds; i++) await statement.execute(store.db);
    return (performance.now() - started) / rounds;
  };
  const drain = async (offset: number): Promise<number> => {
    const client = createClient({ store });
    for (let i = 0; i < o.drainRuns; i++) await client.start(o.drainWorkflow, { i: offset + i });
    const worker = createWorker({
      store,
      workflows: [...o.registrations],
      concurrency: 4,
      reconcileIntervalMs: 0,
      pollIntervalMs: 50,
    });
    const started = performance.now();
    await worker.drain({ timeoutMs: 300_000 });
    const seconds = (performance.now() - started) / 1000;
    await worker.stop();
    return o.drainRuns / seconds;
  };
  const withoutClaim = await emptyClaim();
  const withoutDrain = await drain(0);

  // Put the sleepers to sleep: started in bulk (one statement), then parked by a worker, which
  // is what the index sees in production.
  await sql`
    INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input)
    SELECT gen_random_uuid(), ${napOne.name}, ${napOne.version}, jsonb_build_object('i', g) FROM generate_series(1, ${o.sleeping}) AS g`.execute(
    store.db,
  );
  const parker = createWorker({
    store,
    workflows: [...o.registrations],
    concurrency: 16,
    reconcileIntervalMs: 0,
    pollIntervalMs: 50,
  });
  await parker.drain({ timeoutMs: 600_000 });
  await parker.stop();
  const { rows } = await sql<{
    n: number;
  }>`SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE status = 'waiting'`.execute(store.db);
  if ((rows[0]?.n ?? 0) < o.sleeping) throw new Error(`only ${rows[0]?.n} of ${o.sleeping} runs went to sleep`);
  // Parking left one dead version per sleeper at the front of the due index (its pending row,
  // due in the past) until VACUUM removes it: measured as it is, then after a VACUUM, as
  // autovacuum would leave it.
  const withClaim = await emptyClaim();
  const withDrain = await drain(o.drainRuns);
  await sql`VACUUM ANALYZE ledgerflow.workflow_run`.execute(store.db);
  const vacuumedClaim = await emptyClaim();
  const vacuumedDrain = await drain(2 * o.drainRuns);
  return {
    sleeping: o.sleeping,
    emptyClaimMs: { without: withoutClaim, with: withClaim, vacuumed: vacuumedClaim },
    drainRunsPerSecond: { without: withoutDrain, with: withDrain, vacuumed: vacuumedDrain },
  };
}

export interface FanOutResult {
  readonly children: number;
  /** From the parent's start to the last child row, started by one worker (concurrency 4). */
  readonly forEachChildrenPerSecond: number;
  /** `client.start` of `clientStarts` runs in a loop, one after another. */
  readonly clientStartsPerSecond: number;
  /** One `INSERT … SELECT generate_series` of the same number of run rows: the database's floor. */
  readonly bulkInsertRowsPerSecond: number;
}

export async function measureFanOut(
  store: Store,
  o: {
    readonly children: number;
    readonly clientStarts: number;
    readonly registrations: readonly WorkflowRegistration[];
  },
): Promise<FanOutResult> {
  const client = createClient({ store });
  let started = performance.now();
  for (let i = 0; i < o.clientStarts; i++) await client.start(fanChild, { i: 1_000_000 + i });
  const clientStartsPerSecond = o.clientStarts / ((performance.now() - started) / 1000);
  await sql`DELETE FROM ledgerflow.workflow_run WHERE workflow_name = ${fanChild.name}`.execute(store.db);

  started = performance.now();
  await sql`
    INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input)
    SELECT gen_random_uuid(), ${fanChild.name}, ${fanChild.version}, jsonb_build_object('i', g) FROM generate_series(1, ${o.children}) AS g`.execute(
    store.db,
  );
  const bulkInsertRowsPerSecond = o.children / ((performance.now() - started) / 1000);
  await sql`DELETE FROM ledgerflow.workflow_run WHERE workflow_name = ${fanChild.name}`.execute(store.db);

  const { runId } = await client.start(fanParent, { count: o.children });
  const worker = createWorker({
    store,
    workflows: [...o.registrations],
    concurrency: 4,
    reconcileIntervalMs: 0,
    pollIntervalMs: 50,
  });
  started = performance.now();
  await worker.start();
  for (;;) {
    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE parent_run_id = ${runId}`.execute(store.db);
    if ((rows[0]?.n ?? 0) >= o.children) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const forEachChildrenPerSecond = o.children / ((performance.now() - started) / 1000);
  await worker.drain({ timeoutMs: 600_000 });
  await worker.stop();
  const parent = await client.getRun(runId);
  if (parent.status !== 'completed')
    throw new Error(`fan-out parent ended ${parent.status}: ${JSON.stringify(parent.error)}`);
  return { children: o.children, forEachChildrenPerSecond, clientStartsPerSecond, bulkInsertRowsPerSecond };
}
