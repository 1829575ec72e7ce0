import { sql } from 'kysely';
import { z } from 'zod';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { event, queue, workflow } from 'ledgerflow/dsl';
import {
  bindHandlers,
  createClient,
  createWorker,
  NonRetryableError,
  unknownOutcome,
  type Worker,
} from 'ledgerflow/runtime';
import { shapeHash } from '../../dsl/workflow-shape.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { startTestRun, waitUntil } from './fixtures/run-helpers.js';

/*
 * Where queues meet compensations (issue 24, item 4): a run that starts compensating — a cancel
 * with compensate, a failure commit, a deadline — gives back its slots and its places in line at
 * once, and the freed slot goes to the next real waiter in the same transaction. Compensations
 * hold no slot and ask for none (DESIGN.md "Compensations").
 */

/** One slot for a whole run. */
const line = queue('wt-qc-line', { concurrency: 1 });
const go = event('wt-qc-go', z.object({}));
const Input = z.object({ orderId: z.string() });
const Id = z.object({ id: z.string() });

/** Charges, then waits for `go` holding the line's slot: a run that keeps the slot until told. Its refund parks for orders named `park-…`. */
const holder = workflow('wt-qc-holder', { version: 1, input: Input, queue: { queue: line } })
  .external('charge', {
    output: Id,
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: {
      name: 'refund',
      key: ({ input }) => `refund:${input.orderId}`,
      output: Id,
      retry: { maxAttempts: 1 },
    },
  })
  .waitFor('go', { event: go });

/** Charges, then fails for good; its refund's outcome stays unknown: the compensation parks for an operator. */
const parking = workflow('wt-qc-parking', { version: 1, input: Input, queue: { queue: line } })
  .external('charge', {
    output: Id,
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: {
      name: 'refund',
      key: ({ input }) => `refund:${input.orderId}`,
      output: Id,
      retry: { maxAttempts: 1 },
    },
  })
  .step('confirm', { output: z.object({}), retry: { maxAttempts: 1 } });

const handlers = () => [
  bindHandlers(
    holder,
    {
      charge: { perform: async ({ key }) => ({ id: key }) },
      refund: {
        perform: async ({ key }) => {
          if (key.startsWith('refund:park-')) throw new Error('the refund desk answered 502');
          return { id: key };
        },
        reconcile: async () => unknownOutcome('the refund desk cannot tell'),
      },
    },
    shapeHash(holder),
  ),
  bindHandlers(
    parking,
    {
      charge: { perform: async ({ key }) => ({ id: key }) },
      refund: {
        perform: () => {
          throw new Error('the refund desk answered 502');
        },
        reconcile: async () => unknownOutcome('the refund desk cannot tell'),
      },
      confirm: () => {
        throw new NonRetryableError('the order cannot be confirmed');
      },
    },
    shapeHash(parking),
  ),
];

describeStores('queues meet compensations', (getStore) => {
  const workers: Worker[] = [];
  const drain = async (): Promise<void> => {
    const w = createWorker({
      store: getStore(),
      workflows: handlers(),
      concurrency: 1,
      pollIntervalMs: 20,
      leaseMs: 5_000,
      reconcileIntervalMs: 0,
    });
    workers.push(w);
    await w.drain({ timeoutMs: 30_000 });
  };
  const client = () => createClient({ store: getStore() });
  /** What the line holds, per run: its slots and its places in line. */
  const held = async (runId: string) => {
    const { rows } = await sql<{ slots: number; waiters: number }>`
      SELECT (SELECT count(*)::int FROM ledgerflow.queue_slot WHERE run_id = ${runId}) AS slots,
             (SELECT count(*)::int FROM ledgerflow.queue_waiter WHERE run_id = ${runId}) AS waiters`.execute(
      getStore().db,
    );
    return rows[0]!;
  };
  const waitsFor = async (runId: string) =>
    ((await client().getRun(runId)).waiting_for as { kind?: string } | null)?.kind;
  const holders = async () =>
    (
      await sql<{ run_id: string }>`SELECT run_id FROM ledgerflow.queue_slot WHERE queue = ${line.name}`.execute(
        getStore().db,
      )
    ).rows.map((r) => r.run_id);
  const counters = async () =>
    (
      await sql<{ in_flight: number; waiting: number }>`
        SELECT sum(in_flight) FILTER (WHERE partition = '')::int AS in_flight, sum(waiting) FILTER (WHERE partition <> '')::int AS waiting
          FROM ledgerflow.queue_partition WHERE queue = ${line.name}`.execute(getStore().db)
    ).rows[0]!;

  beforeAll(() => migrateForTest(getStore(), [holder, parking]).then(() => undefined));
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
    // Each test starts with an empty line, whatever the last one left.
    const { rows } = await sql<{ id: string }>`
      SELECT id FROM ledgerflow.workflow_run WHERE workflow_name = ${holder.name} AND finished_at IS NULL AND compensation IS NULL`.execute(
      getStore().db,
    );
    for (const { id } of rows) await client().cancel(id);
  });

  it('a run cancelled with compensate leaves the line at once: the next real waiter gets the slot, not the compensating run', async () => {
    // A gets the one slot and waits for `go` holding it; B and C wait in line behind it, B first.
    const a = await startTestRun(getStore(), holder, { orderId: 'line-a' });
    await drain();
    const b = await startTestRun(getStore(), holder, { orderId: 'line-b' });
    await drain();
    const c = await startTestRun(getStore(), holder, { orderId: 'line-c' });
    await drain();
    expect(await holders()).toEqual([a]);
    expect(await held(b)).toEqual({ slots: 0, waiters: 1 });
    expect(await held(c)).toEqual({ slots: 0, waiters: 1 });

    expect(await client().cancel(b, { compensate: true })).toBe(true);
    // B compensates (nothing of it was recorded): it holds nothing and is counted nowhere in the line.
    expect(await held(b)).toEqual({ slots: 0, waiters: 0 });
    expect(await counters()).toEqual({ in_flight: 1, waiting: 1 });

    // A finishes: its slot goes to C, in the same transaction — B is not handed a slot it would never use.
    expect(await client().cancel(a)).toBe(true);
    expect(await holders()).toEqual([c]);
    expect(await held(b)).toEqual({ slots: 0, waiters: 0 });

    await drain();
    expect((await client().getRun(b)).status).toBe('compensated');
    expect((await client().getRun(c)).waiting_for).toMatchObject({ kind: 'event' });
    expect(await client().cancel(c)).toBe(true);
    expect(await counters()).toEqual({ in_flight: 0, waiting: 0 });
  });

  it('a failure that starts compensation gives the slot back: a compensation parked for reconciliation holds none', async () => {
    const p = await startTestRun(getStore(), parking, { orderId: 'park-p' });
    await drain();
    // Its refund's outcome is unknown after its one attempt: parked, waiting for the reconciler or an operator.
    expect(await client().getRun(p)).toMatchObject({ status: 'needs_reconciliation', compensation: 'failure' });
    expect(await held(p)).toEqual({ slots: 0, waiters: 0 });

    // The next run gets the line's slot while the parked compensation waits for an operator.
    const d = await startTestRun(getStore(), holder, { orderId: 'park-d' });
    await drain();
    expect(await holders()).toEqual([d]);
    expect((await client().getRun(d)).waiting_for).toMatchObject({ kind: 'event' });
    expect(await client().cancel(d)).toBe(true);
    expect(await counters()).toEqual({ in_flight: 0, waiting: 0 });
  });

  it('a deadline that starts compensation gives the slot back to the next in line, even when the compensation parks', async () => {
    const w = createWorker({
      store: getStore(),
      workflows: handlers(),
      concurrency: 1,
      pollIntervalMs: 20,
      leaseMs: 5_000,
      reconcileIntervalMs: 0,
    });
    workers.push(w);
    await w.start();
    // A holds the slot waiting for `go`, with a deadline; B waits in line behind it.
    const a = (await client().start(holder, { orderId: 'park-deadline-a' }, { timeoutMs: 5_000 })).runId;
    await waitUntil('A waiting for go', async () => (await waitsFor(a)) === 'event');
    const b = await startTestRun(getStore(), holder, { orderId: 'deadline-b' });
    await waitUntil('B in line', async () => (await held(b)).waiters === 1);
    expect(await holders()).toEqual([a]);

    // A's deadline passes while it waits: the worker turns it to its compensations, whose refund parks.
    await waitUntil(
      'A parked at its refund',
      async () => (await client().getRun(a)).status === 'needs_reconciliation',
      20_000,
    );
    expect(await client().getRun(a)).toMatchObject({ compensation: 'failure' });
    expect(await held(a)).toEqual({ slots: 0, waiters: 0 });
    await waitUntil('B waiting for go', async () => (await waitsFor(b)) === 'event');
    expect(await holders()).toEqual([b]);
  });
});
