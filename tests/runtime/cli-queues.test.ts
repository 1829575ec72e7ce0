import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shapeHash, type AnyWorkflow } from 'ledgerflow/dsl';
import {
  bindHandlers,
  createClient,
  createWorker,
  type Client,
  type QueueSummary,
  type Store,
  type Worker,
  type WorkflowHandlers,
  type WorkflowRegistration,
} from 'ledgerflow/runtime';
import type { LedgerflowDatabase } from 'ledgerflow/schema';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { fair, limited, perCustomer, QUEUE_WORKFLOWS, rated } from './fixtures/queue-workflows.js';
import { waitUntil } from './fixtures/run-helpers.js';
import { runCli as run } from '../support/run-cli.js';

const TIME = '\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ';

/**
 * A worker serving the four queued fixture workflows, whose queued steps hold their slots until
 * `release()`: what `listQueues` and `ledgerflow queues` read is then standing still.
 */
function heldQueues(store: Store): { readonly worker: Worker; release(): void } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const held = async () => {
    await gate;
    return { ok: true };
  };
  const bind = <W extends AnyWorkflow>(w: W, handlers: WorkflowHandlers<W, LedgerflowDatabase>): WorkflowRegistration =>
    bindHandlers(w, handlers, shapeHash(w));
  const workflows = [
    bind(limited, { before: () => ({ ok: true }), work: held, after: () => ({ ok: true }) }),
    bind(fair, { work: held }),
    bind(perCustomer, { first: () => ({ ok: true }), second: () => ({ ok: true }) }),
    bind(rated, { call: () => ({ ok: true }) }),
  ];
  const worker = createWorker({ store, workflows, concurrency: 8, pollIntervalMs: 20, reconcileIntervalMs: 0 });
  return { worker, release };
}

const byName = (queues: readonly QueueSummary[], name: string): QueueSummary => {
  const found = queues.find((q) => q.name === name);
  if (found === undefined) throw new Error(`queue ${name} is not listed: ${queues.map((q) => q.name).join(', ')}`);
  return found;
};

/**
 * The same line-up on both stores: `wt-q-fair` (one slot, partitioned by customer) with `solo`
 * holding the slot, `b` waiting with two runs (one of priority 5) and `a` with two; `wt-q-two-at-once`
 * (two slots, no partition key) with two held and one waiting.
 */
async function lineUp(client: Client): Promise<void> {
  await client.start(fair, { id: 'solo', customer: 'solo' });
  await waitUntil(
    'solo holding the slot of wt-q-fair',
    async () => byName(await client.listQueues(), 'wt-q-fair').inFlight === 1,
  );
  await client.start(fair, { id: 'a-0', customer: 'a' });
  await client.start(fair, { id: 'a-1', customer: 'a' });
  await client.start(fair, { id: 'b-0', customer: 'b' });
  await client.start(fair, { id: 'b-1', customer: 'b' }, { priority: 5 });
  for (let i = 0; i < 3; i++) await client.start(limited, { id: `l-${i}` });
  await waitUntil('every run in its place', async () => {
    const queues = await client.listQueues();
    const f = byName(queues, 'wt-q-fair');
    const l = byName(queues, 'wt-q-two-at-once');
    return f.inFlight === 1 && f.waiting === 4 && l.inFlight === 2 && l.waiting === 1;
  });
  // Those in line are `waiting`, with no lease.
  const waiting = await client.listRuns({ status: 'waiting' });
  expect(waiting).toHaveLength(5);
  for (const r of waiting)
    expect(r).toMatchObject({ lease_owner: null, lease_expires_at: null, waiting_for: { kind: 'queue' } });
}

async function oldestEnqueued(store: Store, queue: string, partition?: string): Promise<Date> {
  const { rows } = await sql<{ oldest: Date }>`
    SELECT min(enqueued_at) AS oldest FROM ledgerflow.queue_waiter
     WHERE queue = ${queue} AND (${partition ?? null}::text IS NULL OR partition = ${partition ?? null})`.execute(
    store.db,
  );
  return rows[0]!.oldest;
}

describeStores('client.listQueues', (getStore) => {
  let client: Client;
  let held: ReturnType<typeof heldQueues>;
  beforeAll(async () => {
    await migrateForTest(getStore(), QUEUE_WORKFLOWS);
    client = createClient({ store: getStore() });
  });
  afterAll(async () => {
    held?.release();
    await held?.worker.stop();
  });

  it('lists nothing before a worker registered a queue', async () => {
    expect(await client.listQueues()).toEqual([]);
  });

  it('lists each registered queue with its limits, slots in flight, runs in line and the oldest of them', async () => {
    held = heldQueues(getStore());
    await held.worker.start();
    await lineUp(client);
    const queues = await client.listQueues();
    expect(queues.map((q) => q.name)).toEqual(['wt-q-fair', 'wt-q-per-customer', 'wt-q-rate', 'wt-q-two-at-once']);
    expect(byName(queues, 'wt-q-fair')).toEqual({
      name: 'wt-q-fair',
      limits: { concurrency: 1 },
      inFlight: 1,
      waiting: 4,
      partitionsWaiting: 2,
      oldestWaitingSince: await oldestEnqueued(getStore(), 'wt-q-fair'),
      rateLimitedUntil: null,
      registeredAt: expect.any(Date),
      paused: false,
    });
    expect(byName(queues, 'wt-q-two-at-once')).toMatchObject({
      limits: { concurrency: 2 },
      inFlight: 2,
      waiting: 1,
      partitionsWaiting: 1,
    });
    expect(byName(queues, 'wt-q-per-customer')).toMatchObject({
      limits: { partition: { concurrency: 1 } },
      inFlight: 0,
      waiting: 0,
      oldestWaitingSince: null,
    });
    expect(byName(queues, 'wt-q-rate')).toMatchObject({
      limits: { rateLimit: { limit: 5, periodMs: 500 } },
      inFlight: 0,
      waiting: 0,
    });
    expect(queues[0]!.partitions).toBeUndefined();
  });

  it('lists partitions: those in line in the order they will be served, then those only holding slots', async () => {
    const [f] = await client.listQueues({ queue: 'wt-q-fair', partitions: true });
    expect(f!.partitions).toEqual([
      // b's highest priority in line is 5: it is served before a, though neither was ever served.
      {
        partition: 'b',
        inFlight: 0,
        waiting: 2,
        topPriority: 5,
        oldestWaitingSince: await oldestEnqueued(getStore(), 'wt-q-fair', 'b'),
        lastGrantedAt: null,
      },
      {
        partition: 'a',
        inFlight: 0,
        waiting: 2,
        topPriority: 0,
        oldestWaitingSince: await oldestEnqueued(getStore(), 'wt-q-fair', 'a'),
        lastGrantedAt: null,
      },
      {
        partition: 'solo',
        inFlight: 1,
        waiting: 0,
        topPriority: null,
        oldestWaitingSince: null,
        lastGrantedAt: expect.any(Date),
      },
    ]);
    expect(f!.morePartitions).toBe(false);
    const [cut] = await client.listQueues({ queue: 'wt-q-fair', partitions: true, partitionLimit: 2 });
    expect(cut!.partitions!.map((p) => p.partition)).toEqual(['b', 'a']);
    expect(cut!.morePartitions).toBe(true);
    // Without a partition key, every use is in partition `*`.
    const [l] = await client.listQueues({ queue: 'wt-q-two-at-once', partitions: true });
    expect(l!.partitions).toEqual([
      {
        partition: '*',
        inFlight: 2,
        waiting: 1,
        topPriority: 0,
        oldestWaitingSince: await oldestEnqueued(getStore(), 'wt-q-two-at-once'),
        lastGrantedAt: expect.any(Date),
      },
    ]);
  });

  it('refuses an unknown queue and a bad partition limit, saying what to do', async () => {
    await expect(client.listQueues({ queue: 'nope' })).rejects.toThrow(
      'No queue "nope" is registered in this database. Queues are registered by the workers that serve workflows using them; `ledgerflow queues` lists those that are.',
    );
    await expect(client.listQueues({ partitions: true, partitionLimit: 0 })).rejects.toThrow(
      'partitionLimit must be an integer from 1 to 1000 (got 0).',
    );
  });

  it('shows every slot given back once the runs finish', async () => {
    held.release();
    await held.worker.drain({ timeoutMs: 30_000 });
    for (const q of await client.listQueues({ partitions: true })) {
      expect(q).toMatchObject({
        inFlight: 0,
        waiting: 0,
        partitionsWaiting: 0,
        oldestWaitingSince: null,
        partitions: [],
        morePartitions: false,
      });
    }
  });
});

describe('ledgerflow queues (PostgreSQL)', () => {
  let store: TestStore;
  let db: string[];
  let held: ReturnType<typeof heldQueues>;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, QUEUE_WORKFLOWS);
    db = ['--database-url', store.url!];
  }, 60_000);
  afterAll(async () => {
    held?.release();
    await held?.worker.stop();
    await store.close();
  });

  it('says so when no worker registered a queue', async () => {
    expect(await run(['queues', ...db])).toEqual({
      code: 0,
      stdout: 'No queues are registered. A worker registers the queues of the workflows it serves when it starts.\n',
      stderr: '',
    });
  });

  it('prints queues, and with --partitions their partitions, as a table and as JSON', async () => {
    held = heldQueues(store);
    await held.worker.start();
    const client = createClient({ store });
    await lineUp(client);

    const table = await run(['queues', ...db]);
    expect(table.stderr).toBe('');
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(
      /^QUEUE\s+LIMITS\s+IN FLIGHT\s+WAITING\s+PARTITIONS WAITING\s+OLDEST WAITING\s+RATE-LIMITED UNTIL\s+PAUSED$/,
    );
    expect(lines[1]).toMatch(new RegExp(`^wt-q-fair\\s+1 at once\\s+1\\s+4\\s+2\\s+${TIME}\\s+-\\s+no$`));
    expect(lines[2]).toMatch(/^wt-q-per-customer\s+per partition: 1 at once\s+0\s+0\s+0\s+-\s+-\s+no$/);
    expect(lines[3]).toMatch(/^wt-q-rate\s+5 per 500ms\s+0\s+0\s+0\s+-\s+-\s+no$/);
    expect(lines[4]).toMatch(new RegExp(`^wt-q-two-at-once\\s+2 at once\\s+2\\s+1\\s+1\\s+${TIME}\\s+-\\s+no$`));

    const json = await run(['queues', '--json', ...db]);
    expect(json.code).toBe(0);
    const parsed = JSON.parse(json.stdout) as Array<Record<string, unknown>>;
    expect(parsed.map((q) => q['name'])).toEqual(['wt-q-fair', 'wt-q-per-customer', 'wt-q-rate', 'wt-q-two-at-once']);
    expect(parsed[0]).toEqual({
      name: 'wt-q-fair',
      limits: { concurrency: 1 },
      inFlight: 1,
      waiting: 4,
      partitionsWaiting: 2,
      oldestWaitingSince: (await oldestEnqueued(store, 'wt-q-fair')).toISOString(),
      rateLimitedUntil: null,
      registeredAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      paused: false,
    });

    const partitions = await run(['queues', '--queue', 'wt-q-fair', '--partitions', ...db]);
    expect(partitions.code).toBe(0);
    const [queueTable, partitionTable] = partitions.stdout.split('\n\n');
    expect(queueTable!.split('\n')).toHaveLength(2);
    expect(partitionTable!.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^QUEUE\s+PARTITION\s+IN FLIGHT\s+WAITING\s+PRIORITY\s+OLDEST WAITING\s+LAST GRANTED$/),
      expect.stringMatching(new RegExp(`^wt-q-fair\\s+b\\s+0\\s+2\\s+5\\s+${TIME}\\s+-$`)),
      expect.stringMatching(new RegExp(`^wt-q-fair\\s+a\\s+0\\s+2\\s+0\\s+${TIME}\\s+-$`)),
      expect.stringMatching(new RegExp(`^wt-q-fair\\s+solo\\s+1\\s+0\\s+-\\s+-\\s+${TIME}$`)),
    ]);

    const cut = await run(['queues', '--partitions', '--limit', '1', ...db]);
    expect(cut.code).toBe(0);
    expect(cut.stdout).toMatch(/\nwt-q-fair\s+b\s+0\s+2\s+5\s/);
    expect(cut.stdout).toMatch(/\nwt-q-two-at-once\s+\*\s+2\s+1\s+0\s/);
    expect(cut.stdout).toContain(
      'wt-q-fair: more partitions hold slots or have runs waiting than the 1 listed; --limit <n> lists more.\n',
    );
    expect(cut.stdout).not.toContain('wt-q-two-at-once: more partitions');

    const cutJson = JSON.parse(
      (await run(['queues', '--queue', 'wt-q-fair', '--partitions', '--limit', '1', '--json', ...db])).stdout,
    ) as QueueSummary[];
    expect(cutJson[0]).toMatchObject({
      name: 'wt-q-fair',
      partitions: [{ partition: 'b', waiting: 2, topPriority: 5 }],
      morePartitions: true,
    });

    held.release();
    await held.worker.drain({ timeoutMs: 30_000 });
    const after = await run(['queues', '--partitions', ...db]);
    expect(after.stdout).toMatch(/\n\nNo partition holds a slot or has runs waiting\.\n$/);
  });

  it('refuses an unknown queue (exit 1, no stack) and --limit without --partitions (exit 2)', async () => {
    expect(await run(['queues', '--queue', 'nope', ...db])).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'ledgerflow queues: No queue "nope" is registered in this database. Queues are registered by the workers that serve workflows using them; `ledgerflow queues` lists those that are.\n',
    });
    const limit = await run(['queues', '--limit', '5', ...db]);
    expect(limit.code).toBe(2);
    expect(limit.stderr).toContain('--limit is the number of partitions listed per queue; add --partitions.');
    expect((await run(['queues', '--partitions', '--limit', '0', ...db])).stderr).toContain(
      '--limit must be an integer >= 1 (got "0").',
    );
  });
});

/**
 * Listing must not read every run in line: with 100 000 waiters across 1 000 partitions, the
 * counters come from the partition rows and each partition's oldest waiter from one index descent
 * per priority. Checked with PostgreSQL's own statistics, as the grant's cost test does.
 */
describe('listing queues over a deep, wide backlog [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, QUEUE_WORKFLOWS);
    await sql`INSERT INTO ledgerflow.queue (name, concurrency) VALUES ('wt-q-fair', 1)`.execute(store.db);
    await sql`INSERT INTO ledgerflow.queue_partition (queue, partition) VALUES ('wt-q-fair', '')`.execute(store.db);
    await sql`
      INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, status, run_after, waiting_for)
      SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, ${fair.name}, ${fair.version}, '{}'::jsonb, 'waiting', 'infinity',
             jsonb_build_object('kind', 'queue', 'step', 'work', 'queue', 'wt-q-fair', 'partition', 'tenant-' || (g % 1000), 'until', null)
        FROM generate_series(1, 100000) AS g`.execute(store.db);
    // Two priorities in every partition: every 7th run in line has priority 1.
    await sql`
      INSERT INTO ledgerflow.queue_partition (queue, partition, waiting, top_priority)
      SELECT 'wt-q-fair', 'tenant-' || t, 100, 1 FROM generate_series(0, 999) AS t`.execute(store.db);
    await sql`
      INSERT INTO ledgerflow.queue_waiter (queue, partition, run_id, step_name, priority, enqueued_at)
      SELECT 'wt-q-fair', 'tenant-' || (g % 1000), ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, 'work',
             CASE WHEN g % 7 = 0 THEN 1 ELSE 0 END, now() - interval '1 hour' + g * interval '1 millisecond'
        FROM generate_series(1, 100000) AS g`.execute(store.db);
    await sql`ANALYZE ledgerflow.queue_waiter`.execute(store.db);
    await sql`ANALYZE ledgerflow.queue_partition`.execute(store.db);
  }, 120_000);
  afterAll(() => store.close());

  it('reads the waiter index a few tuples per partition in line, never the waiters one by one', async () => {
    const stats = async () => {
      await sql`SELECT pg_stat_force_next_flush()`.execute(store.db);
      const { rows } = await sql<{ seq_scan: number; idx_tup_read: number }>`
        SELECT t.seq_scan::int, (SELECT coalesce(sum(i.idx_tup_read), 0)::int FROM pg_stat_user_indexes i WHERE i.relid = t.relid) AS idx_tup_read
          FROM pg_stat_user_tables t WHERE t.schemaname = 'ledgerflow' AND t.relname = 'queue_waiter'`.execute(
        store.db,
      );
      return rows[0]!;
    };
    const before = await stats();
    const [queue] = await createClient({ store }).listQueues({ partitions: true });
    const after = await stats();
    expect(after.seq_scan - before.seq_scan, 'queue_waiter seq scans').toBe(0);
    // Three descents per partition (priority 1, priority 0, none below), each reading a tuple or none.
    expect(after.idx_tup_read - before.idx_tup_read, 'queue_waiter index tuples read').toBeLessThan(3 * 1_020);

    const { rows } = await sql<{
      oldest: Date;
    }>`SELECT min(enqueued_at) AS oldest FROM ledgerflow.queue_waiter`.execute(store.db);
    expect(queue).toMatchObject({
      name: 'wt-q-fair',
      waiting: 100_000,
      partitionsWaiting: 1_000,
      oldestWaitingSince: rows[0]!.oldest,
      morePartitions: true,
    });
    expect(queue!.partitions).toHaveLength(20);
    // The oldest of a partition is its oldest run of any priority, not the oldest of its highest priority.
    const { rows: first } = await sql<{ oldest: Date }>`
      SELECT min(enqueued_at) AS oldest FROM ledgerflow.queue_waiter WHERE partition = ${queue!.partitions![0]!.partition}`.execute(
      store.db,
    );
    expect(queue!.partitions![0]).toMatchObject({ waiting: 100, topPriority: 1, oldestWaitingSince: first[0]!.oldest });
  });
});
