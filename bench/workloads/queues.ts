import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { z } from 'zod';
import { queue, shapeHash, workflow } from '../../dsl/index.js';
import { bindHandlers, type Store, type WorkflowRegistration } from '../../runtime/index.js';
import { claimStatement } from '../../runtime/worker/claim.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { registerQueueStatement } from '../../runtime/worker/queue-slots.js';

/**
 * Workloads of queues:
 * - W1 through a queue whose limit is never reached (concurrency 10 000): what the slot
 *   machinery costs per run, as a ratio to W1 without a queue (measured by the caller);
 * - the claim, and one grant, with 100 000 runs queued across 1 000 partitions.
 */
const input = z.object({ i: z.number().int().nonnegative() });

export const wideQueue = queue('bench-wide', { concurrency: 10_000 });
export const fairQueue = queue('bench-fair', { concurrency: 1 });

/** W1's one transactional step, behind a queue that never limits it. */
export const queuedOneStep = workflow('bench-queued-one-step', { version: 1, input }).transactional('commit', {
  output: z.object({ i: z.number() }),
  key: ({ input }) => `queued:${input.i}`,
  queue: { queue: wideQueue },
});

/** What waits in the deep backlog (never run by the bench). */
export const fairWork = workflow('bench-fair-work', { version: 1, input }).step('work', {
  output: z.object({ i: z.number() }),
  queue: { queue: fairQueue, partitionKey: ({ input }) => `tenant-${input.i % 1000}` },
});

export const QUEUE_BENCH_WORKFLOWS = [queuedOneStep, fairWork];

export function queueBenchRegistrations(): WorkflowRegistration[] {
  return [
    bindHandlers(queuedOneStep, { commit: async (ctx) => ctx.record({ i: ctx.input.i }) }, shapeHash(queuedOneStep)),
    bindHandlers(fairWork, { work: ({ input }) => ({ i: input.i }) }, shapeHash(fairWork)),
  ];
}

export interface QueuedBacklogCost {
  readonly queued: number;
  readonly partitions: number;
  /** Mean time of a claim that finds nothing due, before and after the backlog was queued. */
  readonly emptyClaimMs: { readonly without: number; readonly with: number };
  /** Mean time of one `queue_grant` that grants one slot from the backlog (and gives it back). */
  readonly grantMs: number;
}

/**
 * Queues `queued` runs across `partitions` partitions of a one-slot queue, as parked waiters (in
 * bulk, the state workers leave them in), and measures the claim and a grant against it.
 */
export async function measureQueuedBacklog(
  store: Store,
  o: { readonly queued: number; readonly partitions: number; readonly registrations: readonly WorkflowRegistration[] },
): Promise<QueuedBacklogCost> {
  const registry = buildRegistry([...o.registrations]);
  const emptyClaim = async (): Promise<number> => {
    const statement = claimStatement(registry, { workerId: 'bench-empty', leaseMs: 30_000, limit: 16 });
    for (let i = 0; i < 50; i++) await statement.execute(store.db);
    const started = performance.now();
    for (let i = 0; i < 500; i++) await statement.execute(store.db);
    return (performance.now() - started) / 500;
  };
  const without = await emptyClaim();
  await registerQueueStatement(fairQueue).execute(store.db);
  await sql`
    INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, status, run_after, waiting_for)
    SELECT gen_random_uuid(), ${fairWork.name}, ${fairWork.version}, jsonb_build_object('i', g), 'waiting', 'infinity',
           jsonb_build_object('kind', 'queue', 'step', 'work', 'queue', ${fairQueue.name}::text, 'partition', 'tenant-' || (g % ${o.partitions}), 'until', null)
      FROM generate_series(1, ${o.queued}) AS g`.execute(store.db);
  await sql`
    INSERT INTO ledgerflow.queue_partition (queue, partition, waiting, top_priority)
    SELECT ${fairQueue.name}, 'tenant-' || t, count(*), 0
      FROM generate_series(1, ${o.queued}) AS g, LATERAL (SELECT g % ${o.partitions} AS t) x GROUP BY t`.execute(
    store.db,
  );
  await sql`
    INSERT INTO ledgerflow.queue_waiter (queue, partition, run_id, step_name, priority, enqueued_at)
    SELECT ${fairQueue.name}, 'tenant-' || ((r.input->>'i')::int % ${o.partitions}), r.id, 'work', 0, r.created_at
      FROM ledgerflow.workflow_run r WHERE r.workflow_name = ${fairWork.name}`.execute(store.db);
  await sql`VACUUM ANALYZE ledgerflow.workflow_run`.execute(store.db);
  await sql`ANALYZE ledgerflow.queue_waiter`.execute(store.db);
  await sql`ANALYZE ledgerflow.queue_partition`.execute(store.db);
  const withBacklog = await emptyClaim();
  // Grant one slot, then free it by hand (not through queue_release, which would grant the next
  // one itself), 200 times: each grant finds the next partition in turn and its oldest waiter.
  const rounds = 200;
  let grantMs = 0;
  for (let i = 0; i < rounds; i++) {
    const started = performance.now();
    await sql`SELECT ledgerflow.queue_grant(${fairQueue.name})`.execute(store.db);
    grantMs += performance.now() - started;
    await sql`DELETE FROM ledgerflow.queue_slot WHERE queue = ${fairQueue.name}`.execute(store.db);
    await sql`UPDATE ledgerflow.queue_partition SET in_flight = 0 WHERE queue = ${fairQueue.name}`.execute(store.db);
  }
  return {
    queued: o.queued,
    partitions: o.partitions,
    emptyClaimMs: { without, with: withBacklog },
    grantMs: grantMs / rounds,
  };
}
