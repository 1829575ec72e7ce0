import { beforeAll, expect, it } from 'vitest';
import { sql } from 'kysely';
import { createClient, createWorker, type Client } from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { acquireSlotStatement } from '../../runtime/worker/queue-slots.js';
import { QUEUE_NO_PARTITION } from '../../runtime/store/queue-partition.js';
import {
  concurrencyQueue,
  fair,
  limited,
  perCustomer,
  QUEUE_WORKFLOWS,
  queueHandlers,
  queueProbe,
  rated,
} from './fixtures/queue-workflows.js';

/**
 * Conformance suite of queues on PostgreSQL and PGlite: a global concurrency limit, one run per
 * partition, a rate limit, and round-robin fairness between partitions — observed by the
 * handlers themselves and checked against the database's own slot table.
 */
describeStores('queues', (getStore) => {
  let client: Client;
  beforeAll(async () => {
    await migrateForTest(getStore(), QUEUE_WORKFLOWS);
    client = createClient({ store: getStore() });
  });

  const drain = async (probe = queueProbe(), concurrency = 8) => {
    const worker = createWorker({
      store: getStore(),
      workflows: queueHandlers(probe),
      concurrency,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    try {
      await worker.drain({ timeoutMs: 60_000 });
    } finally {
      await worker.stop();
    }
    return probe;
  };

  it('never runs more than the queue concurrency at once, and gives every slot back', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `lim-${i}`);
    for (const id of ids) await client.start(limited, { id, ms: 40 });
    const probe = await drain(queueProbe(), 8);
    expect(probe.maxActive.get('limited')).toBe(2);
    expect(probe.finished.filter((f) => f.key === 'limited')).toHaveLength(12);
    const { rows } = await sql<{ in_flight: number; waiting: number }>`
      SELECT in_flight, waiting FROM ledgerflow.queue_partition WHERE queue = 'wt-q-two-at-once' AND partition = ''`.execute(
      getStore().db,
    );
    expect(rows).toEqual([{ in_flight: 0, waiting: 0 }]);
    expect((await sql`SELECT 1 FROM ledgerflow.queue_slot`.execute(getStore().db)).rows).toEqual([]);
  });

  it('runs one workflow per partition at a time, for the whole run', async () => {
    for (let i = 0; i < 6; i++) await client.start(perCustomer, { id: `pc-${i}`, customer: `cust-${i % 2}`, ms: 20 });
    const probe = await drain(queueProbe(), 8);
    expect(probe.maxActive.get('customer:cust-0')).toBe(1);
    expect(probe.maxActive.get('customer:cust-1')).toBe(1);
    // Whole runs, not steps: a customer's runs do not interleave their two steps.
    for (const customer of ['cust-0', 'cust-1']) {
      const order = probe.started.filter((s) => s.key === `customer:${customer}`).map((s) => s.id);
      for (let i = 0; i < order.length; i += 2) expect(order[i]).toBe(order[i + 1]);
    }
  });

  it('runs started already claimed by the worker of their process keep the limits: the step queue and the workflow queue per partition', async () => {
    const probe = queueProbe();
    const worker = createWorker({
      store: getStore(),
      workflows: queueHandlers(probe),
      concurrency: 8,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    await worker.start();
    try {
      const local = createClient({ store: getStore(), worker });
      const runs = await Promise.all([
        ...Array.from({ length: 8 }, (_, i) =>
          local.startAndWait(limited, { id: `local-lim-${i}`, ms: 30 }, { wait: { timeoutMs: 30_000 } }),
        ),
        ...Array.from({ length: 6 }, (_, i) =>
          local.startAndWait(
            perCustomer,
            { id: `local-pc-${i}`, customer: `local-${i % 2}`, ms: 20 },
            { wait: { timeoutMs: 30_000 } },
          ),
        ),
      ]);
      expect(runs.map((r) => r.status)).toEqual(Array(14).fill('completed'));
    } finally {
      await worker.stop();
    }
    expect(probe.maxActive.get('limited')).toBeLessThanOrEqual(2);
    expect(probe.maxActive.get('customer:local-0')).toBe(1);
    expect(probe.maxActive.get('customer:local-1')).toBe(1);
    const { rows } = await sql<{ in_flight: number; waiting: number }>`
      SELECT in_flight, waiting FROM ledgerflow.queue_partition WHERE queue = 'wt-q-two-at-once' AND partition = ''`.execute(
      getStore().db,
    );
    expect(rows).toEqual([{ in_flight: 0, waiting: 0 }]);
  });

  it('grants at most the rate limit per period', async () => {
    for (let i = 0; i < 20; i++) await client.start(rated, { id: `rate-${i}` });
    const probe = await drain(queueProbe(), 8);
    const grants = [...probe.granted].sort((a, b) => a - b);
    expect(grants).toHaveLength(20);
    // A sliding window of 5 per 500 ms, on database time: no 500 ms holds a sixth grant, so 20 take at least 1.5 s.
    for (const first of grants)
      expect(grants.filter((t) => t >= first && t < first + 500).length).toBeLessThanOrEqual(5);
    expect(grants.at(-1)! - grants[0]!).toBeGreaterThanOrEqual(1_500);
  });

  it('grants higher priorities first within a partition', async () => {
    // Queue them all before any worker runs: they are claimed in start order and park in line.
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push((await client.start(fair, { id: `prio-low-${i}`, customer: 'prio', ms: 40 })).runId);
    for (let i = 0; i < 3; i++)
      ids.push((await client.start(fair, { id: `prio-high-${i}`, customer: 'prio', ms: 40 }, { priority: 10 })).runId);
    const probe = queueProbe();
    // One run takes the single slot; it keeps it until the other eight wait in line (a claim may
    // take them in more than one batch on a busy machine), so the order below is the line's.
    let held = false;
    probe.hold = async () => {
      if (held) return;
      held = true;
      const waiting = sql<{
        n: number;
      }>`SELECT count(*)::int AS n FROM ledgerflow.queue_waiter WHERE queue = 'wt-q-fair' AND partition = 'prio'`;
      for (let tries = 0; (await waiting.execute(getStore().db)).rows[0]!.n < 8; tries += 1) {
        if (tries > 1_500) throw new Error('the other eight runs never all waited in line');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    await drain(probe, 16);
    const order = probe.started.filter((s) => s.key === 'fair:prio').map((s) => s.id);
    expect(order).toHaveLength(9);
    // Whoever got the slot first, the three high-priority runs come next, before every other low one.
    expect(
      Math.max(...['prio-high-0', 'prio-high-1', 'prio-high-2'].map((id) => order.indexOf(id))),
    ).toBeLessThanOrEqual(3);
  });

  it('serves a tenant with a few runs while another has a deep backlog (round-robin)', async () => {
    for (let i = 0; i < 60; i++) await client.start(fair, { id: `big-${i}`, customer: 'big', ms: 5 });
    for (let i = 0; i < 4; i++) await client.start(fair, { id: `small-${i}`, customer: 'small', ms: 5 });
    const probe = await drain(queueProbe(), 8);
    const order = probe.started.filter((s) => s.key.startsWith('fair:')).map((s) => s.key);
    expect(order).toHaveLength(64);
    const lastSmall = order.lastIndexOf('fair:small');
    // Alternating once both wait: the small tenant is done long before the big one's backlog.
    expect(lastSmall).toBeLessThan(30);
  });

  it('refuses a slot to a worker whose lease is gone, and writes nothing for it', async () => {
    const { runId } = await client.start(limited, { id: 'fenced-ask' });
    await sql`UPDATE ledgerflow.workflow_run SET status = 'running', fencing_token = 5, lease_owner = 'test', lease_expires_at = statement_timestamp() + interval '1 minute' WHERE id = ${runId}`.execute(
      getStore().db,
    );
    const ask = (token: number) =>
      acquireSlotStatement(concurrencyQueue.name, QUEUE_NO_PARTITION, { runId, fencingToken: token }, 'work').execute(
        getStore().db,
      );
    // A zombie (token 4, taken over since): no answer, no slot, no place in line.
    expect((await ask(4)).rows).toEqual([]);
    const held = sql<{ n: number }>`
      SELECT (SELECT count(*) FROM ledgerflow.queue_slot WHERE run_id = ${runId}) + (SELECT count(*) FROM ledgerflow.queue_waiter WHERE run_id = ${runId}) AS n`;
    expect(Number((await held.execute(getStore().db)).rows[0]!.n)).toBe(0);
    // The holder of the lease gets the slot.
    expect((await ask(5)).rows).toEqual([{ retry_at: null }]);
    expect(Number((await held.execute(getStore().db)).rows[0]!.n)).toBe(1);
    await sql`UPDATE ledgerflow.workflow_run SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = statement_timestamp() WHERE id = ${runId}`.execute(
      getStore().db,
    );
    expect(Number((await held.execute(getStore().db)).rows[0]!.n)).toBe(0);
  });
});
