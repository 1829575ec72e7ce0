import { performance } from 'node:perf_hooks';
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow, type AnyWorkflow } from 'ledgerflow/dsl';
import {
  bindHandlers,
  createClient,
  createWorker,
  found,
  notFound,
  type WorkflowHandlers,
  type WorkflowRegistration,
} from 'ledgerflow/runtime';
import { configureFaults, FAULT_POINTS, onFaultFired, type FaultPointName } from 'ledgerflow/testing';
import { crashableStore } from '../../runtime/testing/crashable-store.js';
import type { WorkerEvent } from '../../runtime/worker/worker-events.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';

/**
 * Issue 24, item 7: a run sees its step outputs in one form, on the first attempt and after any
 * reload. Outputs whose schema declares keys in another order than jsonb keeps them (`zeta`,
 * `amount`, `id` is stored `id`, `zeta`, `amount`) feed functions that serialise or iterate them:
 * a key `JSON.stringify(steps.quote)`, a key `Object.values(steps.charge).join(':')`, a request,
 * a condition, a forEach's items and its children's keys and inputs. The worker is crashed (cut off from the
 * database, as by SIGKILL) at random fault points — every step boundary the workflow has — one
 * to three times, then a fresh worker finishes. Each run must complete with its one charge, no
 * ConflictError, and the very ledger, step outputs and children a crash-free run has.
 */
const LEASE_MS = 300;
const PERFORM_TIMEOUT_MS = 200;
const SETTLE_MS = 20_000;

const line = workflow('stored-shape-line', { version: 1, input: z.object({ line: z.string() }) }).step('price', {
  output: z.object({ line: z.string(), cents: z.number() }),
});

const order = workflow('stored-shape-order', {
  version: 1,
  input: z.object({ orderId: z.string(), amount: z.number() }),
})
  .step('quote', { output: z.object({ zeta: z.string(), amount: z.number(), id: z.string() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string(), at: z.string() }),
    key: ({ steps }) => `charge:${JSON.stringify(steps.quote)}`,
    request: ({ steps }) => Object.values(steps.quote),
    performTimeoutMs: PERFORM_TIMEOUT_MS,
  })
  .transactional('note', {
    output: z.object({ noted: z.string(), by: z.string() }),
    key: ({ steps }) => `note:${Object.values(steps.charge).join(':')}`,
  })
  // Runs only when the quote's first key is `id`: true of the stored form, false of the schema's order.
  .step('receipt', {
    output: z.object({ sent: z.boolean() }),
    when: ({ steps }) => Object.keys(steps.quote)[0] === 'id',
  })
  .forEach('lines', {
    items: ({ steps }) => Object.entries(steps.quote).map(([name, value]) => `${name}=${String(value)}`),
    key: ({ input, item, index }) => `${input.orderId}/${index}/${item}`,
    workflow: line,
    input: ({ item }) => ({ line: item }),
  });

const WORKFLOWS: readonly AnyWorkflow[] = [order, line];

/** A provider that does not dedupe: a crash after it answered is settled by looking the key up. */
const charges = new Map<string, { id: string; applied: number }>();

function bind<W extends AnyWorkflow>(w: W, handlers: WorkflowHandlers<W>): WorkflowRegistration<W> {
  return bindHandlers(w, handlers, shapeHash(w));
}

const registrations: WorkflowRegistration[] = [
  bind(order, {
    quote: ({ input }) => ({ zeta: `z-${input.orderId}`, amount: input.amount, id: input.orderId }),
    charge: {
      perform: async ({ key }) => {
        const charge = charges.get(key) ?? { id: `ch-${charges.size + 1}`, applied: 0 };
        charge.applied += 1;
        charges.set(key, charge);
        return { chargeId: charge.id, at: 'provider' };
      },
      reconcile: async ({ key }) => {
        const charge = charges.get(key);
        return charge === undefined ? notFound() : found({ chargeId: charge.id, at: 'provider' });
      },
    },
    note: async ({ key, record }) => record({ noted: key, by: 'note' }),
    receipt: () => ({ sent: true }),
  }),
  bind(line, { price: ({ input }) => ({ line: input.line, cents: input.line.indexOf('=') }) }),
];

/** Fault points the order's steps reach: each is a step boundary of some kind. */
const REACHED: readonly FaultPointName[] = FAULT_POINTS.filter(
  (p) => p !== 'after-queue-slot' && p !== 'before-wait-commit' && p !== 'before-start-insert',
);

describeStores('step outputs keep one form across reloads', (getStore, kind) => {
  beforeAll(() => migrateForTest(getStore(), WORKFLOWS));
  afterAll(() => configureFaults(undefined));

  async function settled(runId: string): Promise<boolean> {
    const { rows } = await sql<{
      status: string;
    }>`SELECT status FROM ledgerflow.workflow_run WHERE id = ${runId}`.execute(getStore().db);
    return ['completed', 'failed', 'cancelled', 'compensated', 'compensation_failed', 'needs_reconciliation'].includes(
      rows[0]!.status,
    );
  }

  /** Runs a worker until the run settles, or until the fault point fires and the worker "dies" there. */
  async function drive(
    runId: string,
    events: WorkerEvent[],
    crash?: { point: FaultPointName; probability: number; seed: number },
  ): Promise<boolean> {
    const crashable = crashableStore(getStore());
    let crashed = false;
    const unsubscribe = onFaultFired((firing) => {
      if (firing.point !== crash?.point) return;
      crashed = true;
      crashable.crash(`crash at ${firing.point}`);
    });
    if (crash !== undefined) {
      configureFaults({
        seed: crash.seed,
        points: { [crash.point]: { probability: crash.probability, actions: ['throw'], times: 1 } },
      });
    }
    const worker = createWorker({
      store: crashable.store,
      workflows: registrations,
      leaseMs: LEASE_MS,
      heartbeatMs: 60,
      pollIntervalMs: 10,
      reconcileIntervalMs: 0,
      concurrency: 4,
      onEvent: (event) => events.push(event),
    });
    try {
      await worker.start();
      const deadline = performance.now() + SETTLE_MS;
      while (!crashed && performance.now() < deadline && !(await settled(runId)))
        await new Promise((r) => setTimeout(r, 15));
    } finally {
      unsubscribe();
      configureFaults(undefined);
      await worker.stop({ timeoutMs: crashed ? 0 : 1_000 });
    }
    if (crashed) await new Promise((r) => setTimeout(r, LEASE_MS + 20));
    return crashed;
  }

  /**
   * Everything a run recorded, with its order id factored out (request hashes differ by run; a
   * request that changed under its key would have been a ConflictError).
   */
  async function recorded(runId: string, orderId: string): Promise<unknown> {
    const { rows } = await sql<{ status: string; output: unknown; effects: unknown; children: unknown }>`
      SELECT r.status, r.output,
             (SELECT jsonb_agg(jsonb_build_object('step', e.step_name, 'key', e.idempotency_key, 'status', e.status, 'effect', e.effect)
                               ORDER BY e.step_name)
                FROM ledgerflow.step_effect e WHERE e.workflow_id = r.id) AS effects,
             (SELECT jsonb_agg(jsonb_build_object('index', c.parent_index, 'key', c.dedupe_key, 'input', c.input, 'output', c.output)
                               ORDER BY c.parent_index)
                FROM ledgerflow.workflow_run c WHERE c.parent_run_id = r.id) AS children
        FROM ledgerflow.workflow_run r WHERE r.id = ${runId}`.execute(getStore().db);
    const text = JSON.stringify(rows[0]);
    return JSON.parse(text.replaceAll(orderId, '<order>').replace(/ch-\d+/g, '<charge>'));
  }

  let reference: unknown;
  let runs = 0;

  async function runOrder(
    crashes: ReadonlyArray<{ point: FaultPointName; probability: number; seed: number }>,
  ): Promise<void> {
    runs += 1;
    const orderId = `${kind}-${runs}`;
    const client = createClient({ store: getStore(), workflows: registrations });
    const { runId } = await client.start(order, { orderId, amount: 1_250 });
    const events: WorkerEvent[] = [];
    for (const crash of crashes) {
      if (await settled(runId)) break;
      await drive(runId, events, crash);
    }
    // An intent left by a crash is looked up once its horizon (lease + perform timeout) passed.
    await drive(runId, events);
    const conflicts = events.filter((e) => e.type === 'step-failed' && e.error.name === 'ConflictError');
    expect(conflicts, JSON.stringify(conflicts)).toEqual([]);
    const state = await recorded(runId, orderId);
    expect(state).toMatchObject({ status: 'completed' });
    const applied = [...charges].filter(([key]) => key.includes(`"${orderId}"`));
    expect(applied.map(([, c]) => c.applied)).toEqual([1]);
    expect(state).toEqual(reference);
  }

  it('a crash-free run is the reference', async () => {
    runs += 1;
    const orderId = `${kind}-${runs}`;
    const client = createClient({ store: getStore(), workflows: registrations });
    const { runId } = await client.start(order, { orderId, amount: 1_250 });
    await drive(runId, []);
    reference = await recorded(runId, orderId);
    // The condition saw the stored form on the first attempt too: the receipt step ran.
    expect(reference).toMatchObject({ status: 'completed', output: { receipt: { sent: true } } });
  });

  it.each(REACHED)('a crash at the first %s: same ledger, outputs and children as without it', async (point) => {
    await runOrder([{ point, probability: 1, seed: 1 }]);
  });

  it('one to three crashes at random step boundaries: same ledger, outputs and children as without them', async () => {
    const crash = fc.record({
      point: fc.constantFrom(...REACHED),
      probability: fc.constantFrom(0.3, 0.6, 1),
      seed: fc.integer({ min: 1, max: 1_000_000 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(crash, { minLength: 1, maxLength: 3 }), (crashes) => runOrder(crashes)),
      { numRuns: 8, endOnFailure: true },
    );
  }, 240_000);
});
