import { queue, shapeHash, workflow } from 'ledgerflow/dsl';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import {
  bindHandlers,
  createClient,
  createWorker,
  type Store,
  type Worker,
  type WorkerOptions,
} from 'ledgerflow/runtime';
import { configureFaults } from 'ledgerflow/testing';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { commitsIn } from '../support/counting-store.js';
import { describeStores } from '../support/describe-stores.js';
import { recordingStore } from '../support/recording-store.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { appRows, eventLog, runState, setupAppSchema, waitUntil } from './fixtures/run-helpers.js';
import type { AppDatabase } from './fixtures/test-workflows.js';

/**
 * The start rides on the run's first commit (client/deferred-start.ts): a `startAndWait` whose
 * worker runs in the process hands it the run uninserted, and the run's first commit inserts it —
 * inside a transactional step's transaction, or alone before any other commit. Every rule of a
 * start must still hold: the rows are those an insert-first start writes, a failure is recorded
 * on an inserted run, a deadline counts from the start, a run is in the database within about a
 * heartbeat, and a run the worker gives up is inserted by its start and completed by a worker.
 */
const input = z.object({ orderId: z.string() });
const fast = { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 20, backoffFactor: 1, jitter: 0 } as const;
const NO_POLL = { timeoutMs: 30_000, pollMs: 600_000, recheckMs: 600_000 } as const;

const steps = (name: string, timeoutMs?: number) =>
  workflow(name, { version: 1, input, ...(timeoutMs === undefined ? {} : { timeoutMs }) })
    .step('load', { output: z.object({ units: z.number().int() }), retry: fast })
    .transactional('reserve', {
      output: z.object({ rowId: z.number() }),
      key: ({ input }) => `reserve:${input.orderId}`,
      retry: fast,
    })
    .external('charge', {
      output: z.object({ chargeId: z.string() }),
      key: ({ input }) => `charge:${input.orderId}`,
      idempotentByKey: true,
      retry: fast,
    });

const deferred = steps('wt-deferred');
/** Plain steps only, one of them skipped: the run's one commit is its completion. */
const plain = workflow('wt-deferred-plain', { version: 1, input })
  .step('load', { output: z.object({ units: z.number().int() }) })
  .step('audit', { output: z.object({ ok: z.boolean() }), when: ({ input }) => input.orderId.startsWith('audit') })
  .step('total', { output: z.object({ cents: z.number().int() }) });
/** One plain step and a deadline (a start column built per start): the run's one commit is its completion. */
const single = workflow('wt-deferred-single', { version: 1, input, timeoutMs: 60_000 }).step('load', {
  output: z.object({ units: z.number().int() }),
  retry: fast,
});
/** A plain step before an `external` one: the carry is written before the intent, with the insert. */
const plainThenCharge = workflow('wt-deferred-charge', { version: 1, input })
  .step('load', { output: z.object({ units: z.number().int() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    retry: fast,
  });
/** Two plain steps behind a workflow-level queue of one slot: a start that waits in line is not a plain completion. */
const inLine = workflow('wt-deferred-in-line', {
  version: 1,
  input,
  queue: { queue: queue('wt-deferred-line', { concurrency: 1 }) },
})
  .step('load', { output: z.object({ units: z.number().int() }) })
  .step('total', { output: z.object({ cents: z.number().int() }) });
/** The same with a 300 ms deadline. */
const late = steps('wt-deferred-late', 300);

interface Behaviour {
  /** `load` waits for this first. */
  readonly gate?: Promise<unknown>;
  /** `load` sleeps this long. */
  readonly loadMs?: number;
  /** `reserve` throws on its first attempt, after writing its row. */
  readonly failFirstReserve?: boolean;
}

function handlers(wf: typeof deferred, payments: FakePaymentProvider, behaviour: Behaviour = {}) {
  return bindHandlers(
    wf,
    {
      load: async () => {
        await behaviour.gate;
        if (behaviour.loadMs !== undefined) await new Promise((resolve) => setTimeout(resolve, behaviour.loadMs));
        return { units: 2 };
      },
      reserve: async ({ tx, runId, input, attempt, record }) => {
        const row = await tx
          .insertInto('wt_app.reservation')
          .values({ run_id: runId, order_id: input.orderId, quantity: 2, written_by: `attempt ${attempt}` })
          .returning('id')
          .executeTakeFirstOrThrow();
        if (behaviour.failFirstReserve === true && attempt === 1)
          throw new Error('the first reserve fails after its write');
        return record({ rowId: row.id });
      },
      charge: {
        perform: async ({ key, input }) => {
          const charged = await payments.charge(
            { reference: input.orderId, amountCents: 200, currency: 'eur', customerId: 'c' },
            { idempotencyKey: key },
          );
          return { chargeId: charged.id };
        },
      },
    } satisfies Parameters<typeof bindHandlers<typeof deferred, AppDatabase>>[1],
    shapeHash(wf),
  );
}

const recorded = recordingStore;

/** A run's rows without what differs between two runs of the same workflow and input: ids, times, workers. */
function shapeOf(state: Awaited<ReturnType<typeof runState>>) {
  const strip = (row: object) =>
    Object.fromEntries(
      Object.entries(row).filter(([k]) => !/^(id|run_id|worker_id|lease_owner)$|_at$|_after$/.test(k)),
    );
  return {
    run: strip(state.run),
    attempts: state.attempts.map(strip),
    results: state.results.map(strip),
    effects: state.effects.map(strip),
  };
}

const isRunInsert = (s: string): boolean => /INSERT INTO ledgerflow\.workflow_run/.test(s);
const isCompletedInsert = (s: string): boolean =>
  isRunInsert(s) && /SELECT[^;]*'completed'/.test(s.slice(s.indexOf('INSERT INTO ledgerflow.workflow_run')));

describeStores('a start whose insert rides on the run’s first commit', (getStore) => {
  const workers: Worker[] = [];
  const worker = (store: Store, options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({
      store,
      pollIntervalMs: 600_000,
      reconcileIntervalMs: 0,
      scheduleIntervalMs: 0,
      leaseMs: 60_000,
      ...options,
    });
    workers.push(w);
    return w;
  };
  beforeAll(async () => {
    await migrateForTest(getStore(), [deferred, late, plain, plainThenCharge, single, inLine]);
    await setupAppSchema(getStore());
  });
  afterEach(async () => {
    configureFaults(undefined);
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 1_000 })));
  });

  it('step → transactional → external costs two commits, the insert first in the transactional step’s transaction; a start that names its run inserts first (three)', async () => {
    const { store, statements } = recorded(getStore());
    const payments = new FakePaymentProvider();
    const w = worker(store, { workflows: [handlers(deferred, payments)], concurrency: 2 });
    await w.start();
    const client = createClient({ store, worker: w });
    await client.startAndWait(deferred, { orderId: 'warm-up' }, { wait: NO_POLL });

    statements.length = 0;
    const run = await client.startAndWait(deferred, { orderId: 'd-1' }, { wait: NO_POLL });
    expect(run.status).toBe('completed');
    const riding = statements.splice(0);
    expect(commitsIn(riding)).toBe(2);
    const insertAt = riding.findIndex(isRunInsert);
    expect(insertAt).toBeGreaterThan(0);
    expect(riding[insertAt - 1]).toMatch(/^BEGIN;/);

    // Named by a dedupe key: another start may name the same run, so it is inserted before any step runs.
    const named = await client.startAndWait(deferred, { orderId: 'd-2' }, { dedupeKey: 'd-2', wait: NO_POLL });
    expect(named.status).toBe('completed');
    const first = statements.splice(0);
    expect(commitsIn(first)).toBe(3);
    expect(isRunInsert(first[0]!)).toBe(true);

    // Row for row what an insert-first start leaves: times in order, one write, one charge.
    for (const id of [run.id, named.id]) {
      const state = await runState(getStore(), id);
      expect(state.run.status).toBe('completed');
      expect(state.run.lease_owner).toBeNull();
      expect(state.run.notify_settled).toBe(false);
      const attempts = state.attempts.map((a) => `${a.step_name}#${a.attempt} ${a.status} token ${a.fencing_token}`);
      expect(attempts).toEqual([
        'load#1 succeeded token 1',
        'reserve#1 succeeded token 1',
        'charge#1 succeeded token 1',
      ]);
      const times = state.attempts.flatMap((a) => [a.started_at.getTime(), a.finished_at!.getTime()]);
      expect([...times].sort((a, b) => a - b)).toEqual(times);
      // Both estimated on database time from the worker's measure, by two statements; the carry keeps them in order.
      expect(state.run.created_at.getTime()).toBeLessThanOrEqual(times[0]!);
      expect(state.effects.map((e) => `${e.step_name} ${e.status}`).sort()).toEqual([
        'charge recorded',
        'reserve recorded',
      ]);
      expect(await appRows(getStore(), id)).toHaveLength(1);
    }
    expect(payments.chargesForKey('charge:d-1')).toBe(1);
  });

  it('plain steps only (one skipped): ONE commit inserts the run completed, rows in order and as an inserted-first run has them; before an external step the insert goes alone before the carry', async () => {
    const { store, statements } = recorded(getStore());
    const payments = new FakePaymentProvider();
    const w = worker(store, {
      workflows: [
        bindHandlers(
          plain,
          {
            load: async () => ({ units: 2 }),
            audit: async () => ({ ok: true }),
            total: async ({ steps }) => ({ cents: steps.load.units * 100 }),
          },
          shapeHash(plain),
        ),
        bindHandlers(
          plainThenCharge,
          {
            load: async () => ({ units: 2 }),
            charge: {
              perform: async ({ key, input }) => ({
                chargeId: (
                  await payments.charge(
                    { reference: input.orderId, amountCents: 200, currency: 'eur', customerId: 'c' },
                    { idempotencyKey: key },
                  )
                ).id,
              }),
            },
          },
          shapeHash(plainThenCharge),
        ),
      ],
      concurrency: 2,
    });
    await w.start();
    const client = createClient({ store, worker: w });
    await client.startAndWait(plain, { orderId: 'warm-up' }, { wait: NO_POLL });
    await client.startAndWait(plainThenCharge, { orderId: 'warm-up' }, { wait: NO_POLL });

    statements.length = 0;
    const run = await client.startAndWait(plain, { orderId: 'p-1' }, { wait: NO_POLL });
    expect(run.status).toBe('completed');
    expect(run.output).toEqual({ load: { units: 2 }, total: { cents: 200 } });
    const one = statements.splice(0);
    // One statement, no transaction of its own: the run inserted completed (insert-run.ts, `completion`).
    expect(commitsIn(one)).toBe(1);
    expect(one.filter(isCompletedInsert)).toHaveLength(1);
    expect(one.some((t) => /^BEGIN\b/.test(t))).toBe(false);
    const state = await runState(getStore(), run.id);
    expect(state.run.status).toBe('completed');
    expect(state.attempts.map((a) => `${a.step_name}#${a.attempt} ${a.status} token ${a.fencing_token}`)).toEqual([
      'load#1 succeeded token 1',
      'audit#1 succeeded token 1',
      'total#1 succeeded token 1',
    ]);
    const times = state.attempts.flatMap((a) => [a.started_at.getTime(), a.finished_at!.getTime()]);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    expect(state.run.created_at.getTime()).toBeLessThanOrEqual(times[0]!);
    expect(state.run.finished_at!.getTime()).toBeGreaterThanOrEqual(times.at(-1)!);
    // The same rows as a run inserted first (a start that names its run is never deferred).
    const named = await client.startAndWait(plain, { orderId: 'p-1' }, { runId: crypto.randomUUID(), wait: NO_POLL });
    statements.length = 0;
    expect(shapeOf(await runState(getStore(), run.id))).toEqual(shapeOf(await runState(getStore(), named.id)));

    // load → charge: the insert alone, then load's result before the charge's intent.
    const charged = await client.startAndWait(plainThenCharge, { orderId: 'p-2' }, { wait: NO_POLL });
    expect(charged.status).toBe('completed');
    const two = statements.splice(0);
    expect(isRunInsert(two[0]!)).toBe(true);
    expect(two.filter(isRunInsert)).toHaveLength(1);
    expect(commitsIn(two)).toBe(4);
    expect(payments.chargesForKey('charge:p-2')).toBe(1);
    expect((await runState(getStore(), charged.id)).effects.map((e) => `${e.step_name} ${e.status}`)).toEqual([
      'charge recorded',
    ]);
  });

  it('one plain step: one statement and one commit for the whole workflow, the deadline from the start; a failed first insert is recorded and retried like any failure', async () => {
    const { store, statements } = recorded(getStore());
    const log = eventLog();
    let calls = 0;
    const w = worker(store, {
      workflows: [
        bindHandlers(
          single,
          {
            load: async () => {
              calls += 1;
              return { units: 3 };
            },
          },
          shapeHash(single),
        ),
      ],
      concurrency: 1,
      // The failed attempt's retry is due later: a claim takes it.
      pollIntervalMs: 50,
      onEvent: log.onEvent,
    });
    await w.start();
    const client = createClient({ store, worker: w });
    await client.startAndWait(single, { orderId: 'warm-up' }, { wait: NO_POLL });

    statements.length = 0;
    const run = await client.startAndWait(single, { orderId: 's-1' }, { wait: NO_POLL });
    expect(run).toMatchObject({ status: 'completed', output: { load: { units: 3 } } });
    const one = statements.splice(0);
    expect(commitsIn(one)).toBe(1);
    expect(one).toHaveLength(1);
    expect(isRunInsert(one[0]!)).toBe(true);
    const state = await runState(getStore(), run.id);
    expect(state.run.deadline_at!.getTime() - state.run.created_at.getTime()).toBe(60_000);
    expect(state.run.fencing_token).toBe(1);
    const [attempt] = state.attempts;
    expect(state.run.created_at.getTime()).toBeLessThanOrEqual(attempt!.started_at.getTime());
    expect(attempt!.started_at.getTime()).toBeLessThanOrEqual(attempt!.finished_at!.getTime());
    expect(attempt!.finished_at!.getTime()).toBeLessThanOrEqual(state.run.finished_at!.getTime());
    expect(state.results.map((r) => `${r.step_name}#${r.attempt} ${JSON.stringify(r.output)}`)).toEqual([
      'load#1 {"units":3}',
    ]);
    const named = await client.startAndWait(single, { orderId: 's-1' }, { runId: crypto.randomUUID(), wait: NO_POLL });
    expect(shapeOf(await runState(getStore(), run.id))).toEqual(shapeOf(await runState(getStore(), named.id)));

    // The completed insert fails: nothing written; the run is inserted alone to record the failure, and its retry completes it.
    configureFaults({ seed: 5, points: { 'before-start-insert': { probability: 1, actions: ['throw'], times: 1 } } });
    calls = 0;
    const failed = await client.startAndWait(
      single,
      { orderId: 's-2' },
      { wait: { ...NO_POLL, pollMs: 50, recheckMs: 100 } },
    );
    expect(failed.status).toBe('completed');
    expect(calls).toBe(2);
    const after = await runState(getStore(), failed.id);
    expect(after.attempts.map((a) => `${a.step_name}#${a.attempt} ${a.status}`)).toEqual([
      'load#1 failed',
      'load#2 succeeded',
    ]);
    expect(after.results.map((r) => `${r.step_name}#${r.attempt}`)).toEqual(['load#2']);
  });

  it('a transactional step that fails first: the run is inserted alone, the failure recorded on it, and the retry completes it with one write', async () => {
    const store = getStore();
    // Polling: the retry is due by time, after its backoff.
    const w = worker(store, {
      workflows: [handlers(deferred, new FakePaymentProvider(), { failFirstReserve: true })],
      concurrency: 1,
      pollIntervalMs: 50,
    });
    await w.start();
    const run = await createClient({ store, worker: w }).startAndWait(
      deferred,
      { orderId: 'd-fail' },
      { wait: NO_POLL },
    );
    expect(run.status).toBe('completed');
    const state = await runState(store, run.id);
    expect(state.attempts.map((a) => `${a.step_name}#${a.attempt} ${a.status}`)).toEqual([
      'load#1 succeeded',
      'reserve#1 failed',
      'reserve#2 succeeded',
      'charge#1 succeeded',
    ]);
    expect((await appRows(store, run.id)).map((r) => r.written_by)).toEqual(['attempt 2']);
  });

  it('a first step that outlasts a heartbeat: the run is inserted alone meanwhile and can be read while the step runs', async () => {
    const store = getStore();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const log = eventLog();
    const w = worker(store, {
      workflows: [handlers(deferred, new FakePaymentProvider(), { gate })],
      concurrency: 1,
      leaseMs: 3_000,
      onEvent: log.onEvent,
    });
    await w.start();
    const client = createClient({ store, worker: w });
    const waiting = client.startAndWait(deferred, { orderId: 'd-slow' }, { wait: NO_POLL });
    const runId = await waitUntil('the run inserted by the lease keeper', async () => {
      const rows = await store.db
        .selectFrom('ledgerflow.workflow_run')
        .select(['id', 'status', 'current_step'])
        .where('input', '@>', JSON.stringify({ orderId: 'd-slow' }) as never)
        .execute();
      return rows[0];
    });
    expect(runId).toMatchObject({ status: 'running', current_step: 0 });
    // Still held by this flight (not given back): the renewals go on through the step.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(
      await store.db
        .selectFrom('ledgerflow.workflow_run')
        .select(['status', 'fencing_token'])
        .where('id', '=', runId.id)
        .executeTakeFirst(),
    ).toEqual({
      status: 'running',
      fencing_token: 1,
    });
    open();
    const run = await waiting;
    expect(run).toMatchObject({ id: runId.id, status: 'completed' });
    const state = await runState(store, run.id);
    expect(state.attempts.map((a) => `${a.step_name}#${a.attempt} ${a.status}`)).toEqual([
      'load#1 succeeded',
      'reserve#1 succeeded',
      'charge#1 succeeded',
    ]);
    // One flight drove it throughout: never given back, never lost.
    expect(log.events.filter((e) => e.type === 'run-claimed' || e.type === 'lease-lost').map((e) => e.type)).toEqual([
      'run-claimed',
    ]);
    expect(log.errors()).toEqual([]);
  });

  it('a deadline counts from the start: a first step that outlasts it has the run cancelled at its first commit, nothing written', async () => {
    const store = getStore();
    const log = eventLog();
    const w = worker(store, {
      workflows: [handlers(late, new FakePaymentProvider(), { loadMs: 500 })],
      concurrency: 1,
      onEvent: log.onEvent,
    });
    await w.start();
    const run = await createClient({ store, worker: w }).startAndWait(late, { orderId: 'd-late' }, { wait: NO_POLL });
    expect(run.status).toBe('cancelled');
    const state = await runState(store, run.id);
    expect(state.run.deadline_at!.getTime() - state.run.created_at.getTime()).toBe(300);
    expect(await appRows(store, run.id)).toEqual([]);
    expect(state.effects).toEqual([]);
  });

  it('a worker that cannot insert the run gives it back: its start inserts it unclaimed, and a worker completes it', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const log = eventLog();
    // Both of the worker's inserts fail: the one in the transaction, then the one alone that would record the failure.
    configureFaults({ seed: 3, points: { 'before-start-insert': { probability: 1, actions: ['throw'], times: 2 } } });
    const w = worker(store, {
      workflows: [handlers(deferred, payments)],
      concurrency: 1,
      pollIntervalMs: 50,
      onEvent: log.onEvent,
    });
    await w.start();
    const run = await createClient({ store, worker: w }).startAndWait(
      deferred,
      { orderId: 'd-given-up' },
      { wait: { ...NO_POLL, pollMs: 50, recheckMs: 100 } },
    );
    expect(run.status).toBe('completed');
    expect(log.errors().map((e) => (e.type === 'error' ? e.where : e.type))).toContain('run');
    const state = await runState(store, run.id);
    // Inserted by the start (pending, then claimed): its first claim opened the attempts.
    expect(state.attempts.map((a) => `${a.step_name}#${a.attempt} ${a.status}`)).toEqual([
      'load#1 succeeded',
      'reserve#1 succeeded',
      'charge#1 succeeded',
    ]);
    expect(await appRows(store, run.id)).toHaveLength(1);
    expect(payments.chargesForKey('charge:d-given-up')).toBe(1);
  });
  it('plain steps behind a queue of one slot, three starts at once: each waits its turn, is woken when the slot frees, and leaves no slot or waiter behind', async () => {
    const store = getStore();
    let inside = 0;
    let most = 0;
    const w = worker(store, {
      workflows: [
        bindHandlers(
          inLine,
          {
            load: async () => {
              inside += 1;
              most = Math.max(most, inside);
              await new Promise((resolve) => setTimeout(resolve, 30));
              inside -= 1;
              return { units: 2 };
            },
            total: async () => ({ cents: 200 }),
          },
          shapeHash(inLine),
        ),
      ],
      concurrency: 2,
    });
    await w.start();
    const client = createClient({ store, worker: w });
    // No poll and no recheck within the wait: only the slot's release may wake a run in line.
    const runs = await Promise.all(
      ['q-1', 'q-2', 'q-3'].map((orderId) =>
        client.startAndWait(inLine, { orderId }, { wait: { ...NO_POLL, timeoutMs: 15_000 } }),
      ),
    );
    expect(runs.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    expect(runs.map((r) => r.output)).toEqual(Array(3).fill({ load: { units: 2 }, total: { cents: 200 } }));
    expect(most).toBe(1);
    const left = await store.db
      .selectFrom('ledgerflow.queue_slot')
      .select('run_id')
      .where(
        'run_id',
        'in',
        runs.map((r) => r.id),
      )
      .execute();
    expect(left).toEqual([]);
    const waiting = await store.db
      .selectFrom('ledgerflow.queue_waiter')
      .select('run_id')
      .where(
        'run_id',
        'in',
        runs.map((r) => r.id),
      )
      .execute();
    expect(waiting).toEqual([]);
  });
});
