import { queue, shapeHash, workflow } from 'ledgerflow/dsl';
import { sql } from 'kysely';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import {
  bindHandlers,
  createClient,
  createWorker,
  type Store,
  type Worker,
  type WorkerEvent,
} from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { recordingStore } from '../support/recording-store.js';
import { waitUntil } from './fixtures/run-helpers.js';

/**
 * The claim takes the queue slot a claimed run's current step asks for first on the fast path
 * (worker/claim.ts, core 0024): a step behind a queue limited by concurrency alone costs no
 * statement and no commit of its own to get its slot. The limit stays exact — the claim and the
 * asks share the numbered slots — whether the claim finds the queue free or full (the run then
 * asks, and waits in line), across retries (a failed attempt gives its slot back, the next claim
 * takes it again) and with several workers whose claims each take several slots in one
 * transaction (numbers are reserved without waiting, so two such claims never deadlock).
 */
const input = z.object({ id: z.string() });
const twoAtOnce = queue('wt-qc-two', { concurrency: 2 });
const queued = workflow('wt-qc-first', { version: 1, input }).transactional('work', {
  output: z.object({ ok: z.boolean() }),
  key: ({ input }) => `work:${input.id}`,
  queue: { queue: twoAtOnce },
  retry: { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 20, backoffFactor: 1, jitter: 0 },
});

interface Probe {
  inside: number;
  most: number;
  readonly failOnce: Set<string>;
}

function registration(probe: Probe, ms: number) {
  return bindHandlers(
    queued,
    {
      work: async ({ input, attempt, record }) => {
        probe.inside += 1;
        probe.most = Math.max(probe.most, probe.inside);
        try {
          await new Promise((resolve) => setTimeout(resolve, ms));
          if (attempt === 1 && probe.failOnce.has(input.id)) throw new Error(`${input.id} fails its first attempt`);
          return record({ ok: true });
        } finally {
          probe.inside -= 1;
        }
      },
    },
    shapeHash(queued),
  );
}

/** Statements that ask for a slot on their own, outside a claim. */
const asksAlone = (statements: readonly string[]): string[] =>
  statements.filter((s) => /queue_take_fast|queue_acquire/.test(s) && !/slot_taken AS/.test(s));

describeStores('a queue slot taken by the claim', (getStore) => {
  const workers: Worker[] = [];
  const errors: string[] = [];
  const worker = (store: Store, probe: Probe, concurrency: number, ms: number): Worker => {
    const w = createWorker({
      store,
      workflows: [registration(probe, ms)],
      concurrency,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      leaseMs: 30_000,
      onEvent: (event: WorkerEvent) => {
        if (event.type === 'error') errors.push(`${event.where}: ${event.error.message}`);
      },
    });
    workers.push(w);
    return w;
  };
  beforeAll(async () => {
    await migrateForTest(getStore(), [queued]);
    await sql`CREATE TABLE IF NOT EXISTS wt_qc_done (id text)`.execute(getStore().db);
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 2_000 })));
    errors.length = 0;
  });

  const settle = async (ids: readonly string[]) => {
    await waitUntil(`the ${ids.length} runs to complete`, async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE id = ANY(${ids}::uuid[]) AND status = 'completed'`.execute(
        getStore().db,
      );
      return rows[0]!.n === ids.length;
    });
    const { rows } = await sql<{ slots: number; waiters: number; in_flight: number }>`
      SELECT (SELECT count(*)::int FROM ledgerflow.queue_slot WHERE queue = ${twoAtOnce.name}) AS slots,
             (SELECT count(*)::int FROM ledgerflow.queue_waiter WHERE queue = ${twoAtOnce.name}) AS waiters,
             (SELECT in_flight FROM ledgerflow.queue_partition WHERE queue = ${twoAtOnce.name} AND partition = '') AS in_flight`.execute(
      getStore().db,
    );
    expect(rows).toEqual([{ slots: 0, waiters: 0, in_flight: 0 }]);
  };

  it('a queue that is never full: every slot is taken by a claim, none asked for alone — a retry’s too', async () => {
    const { store, statements } = recordingStore(getStore());
    const probe: Probe = { inside: 0, most: 0, failOnce: new Set(['free-2']) };
    const client = createClient({ store: getStore() });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await client.start(queued, { id: `free-${i}` })).runId);
    await worker(store, probe, 1, 5).start();
    await settle(ids);
    expect(asksAlone(statements)).toEqual([]);
    expect(statements.filter((s) => /slot_taken AS/.test(s)).length).toBeGreaterThan(0);
    expect(probe.most).toBe(1);
    const { rows } = await sql<{ attempts: number }>`
      SELECT count(*)::int AS attempts FROM ledgerflow.step_attempt WHERE run_id = ANY(${ids}::uuid[])`.execute(
      getStore().db,
    );
    expect(rows[0]!.attempts).toBe(6);
    expect(errors).toEqual([]);
  });

  it('more flights than slots, two workers: never more than two at once; those the claim could not serve ask and wait in line', async () => {
    const { store, statements } = recordingStore(getStore());
    const probe: Probe = { inside: 0, most: 0, failOnce: new Set(['full-3', 'full-11']) };
    const client = createClient({ store: getStore() });
    const ids: string[] = [];
    for (let i = 0; i < 24; i++) ids.push((await client.start(queued, { id: `full-${i}` })).runId);
    await Promise.all([worker(store, probe, 6, 15).start(), worker(store, probe, 6, 15).start()]);
    await settle(ids);
    expect(probe.most).toBeLessThanOrEqual(2);
    expect(probe.most).toBe(2);
    // The queue was full for most claims: runs asked alone and joined the line.
    expect(asksAlone(statements).length).toBeGreaterThan(0);
    expect(errors).toEqual([]);
  });
});
