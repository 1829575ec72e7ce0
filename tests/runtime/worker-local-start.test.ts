import { sql, type KyselyPlugin } from 'kysely';
import { shapeHash } from 'ledgerflow/dsl';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { bindHandlers, createClient, createWorker, RUNS_CHANNEL, type Store, type Worker } from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { eventLog, runState, waitUntil } from './fixtures/run-helpers.js';
import { poison, poisonHandlers } from './fixtures/poison-workflows.js';

/**
 * The start path (issue 15). A client given the worker of its process claims the runs it starts
 * for that worker in the start's own transaction (no NOTIFY, one durable commit less); a NOTIFY
 * makes a worker claim only when it has a slot free, and a run that ends wakes the loop only
 * when a NOTIFY found no slot free. The poll is ten minutes: a run that completes here was
 * taken by a start's claim, a notification, or a freed slot after a missed one — never a poll.
 */
const NO_POLL = { pollIntervalMs: 600_000, reconcileIntervalMs: 0 } as const;

/**
 * The store, recording every statement it runs and every notification its subscriptions receive;
 * `failNextStartClaim()` makes the next start's claim statement throw after it ran.
 */
function observed(base: Store): { store: Store; statements: string[]; notifications: string[]; failNextStartClaim: () => void } {
  const statements: string[] = [];
  const notifications: string[] = [];
  const failing = new Set<unknown>();
  let failNext = false;
  const recorder: KyselyPlugin = {
    transformQuery: ({ node, queryId }) => {
      const text = base.db.getExecutor().compileQuery(node, queryId).sql;
      statements.push(text);
      if (failNext && isStartClaim(text)) {
        failNext = false;
        failing.add(queryId);
      }
      return node;
    },
    transformResult: async ({ result, queryId }) => {
      if (failing.delete(queryId)) throw new Error('start claim failed (test)');
      return result;
    },
  };
  return {
    statements,
    notifications,
    failNextStartClaim: () => (failNext = true),
    store: {
      ...base,
      db: base.db.withPlugin(recorder),
      listen: (channel, onNotify, onLost, options) =>
        base.listen(
          channel,
          (payload) => {
            if (channel === RUNS_CHANNEL) notifications.push(payload);
            onNotify(payload);
          },
          onLost,
          options,
        ),
    },
  };
}

const isLoopClaim = (s: string): boolean => /\bclaimed AS\b/.test(s) && /\bexpired AS\b/.test(s);
const isStartClaim = (s: string): boolean => /\bclaimed AS\b/.test(s) && !/\bexpired AS\b/.test(s) && /r\.id = \$\d+::uuid/.test(s);

/** A handler that holds its step until `open()`. */
function gated(): { registration: ReturnType<typeof poisonHandlers>; open: () => void } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  return {
    registration: bindHandlers(poison, { explode: async () => (await gate, { survivedBy: 'gated' }) }, shapeHash(poison)),
    open,
  };
}

describeStores('starts claimed for the worker of their process', (getStore) => {
  const workers: Worker[] = [];
  beforeAll(() => migrateForTest(getStore(), [poison]));
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await sql`UPDATE ledgerflow.workflow_run SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = now()
               WHERE status NOT IN ('completed', 'failed', 'cancelled')`.execute(getStore().db);
  });

  it('inserts and claims the run in one transaction, without a NOTIFY; the worker drives it at once', async () => {
    const { store, statements, notifications } = observed(getStore());
    const log = eventLog();
    const worker = createWorker({ store, workflows: [poisonHandlers('local')], concurrency: 2, ...NO_POLL, onEvent: log.onEvent });
    workers.push(worker);
    await worker.start();
    const client = createClient({ store, worker });
    const before = statements.length;

    const first = await client.startAndWait(poison, { label: 'local-1' }, { wait: { timeoutMs: 10_000 } });
    const { runId: second } = await client.start(poison, { label: 'local-2' });
    await log.waitFor('run-completed', (e) => e.runId === second);

    expect(first.status).toBe('completed');
    for (const id of [first.id, second]) {
      const { run, attempts } = await runState(getStore(), id);
      expect(run).toMatchObject({ status: 'completed', fencing_token: 1 });
      expect(attempts.map((a) => [a.attempt, a.status, a.worker_id])).toEqual([[1, 'succeeded', worker.id]]);
    }
    const during = statements.slice(before);
    expect(during.filter(isStartClaim)).toHaveLength(2);
    expect(during.filter(isLoopClaim)).toEqual([]);
    expect(notifications).toEqual([]);
    expect(log.errors()).toEqual([]);
  });

  it('with no slot free, the start NOTIFYs; the worker, full, claims nothing until its slot frees, then takes the run', async () => {
    const { store, statements, notifications } = observed(getStore());
    const log = eventLog();
    const { registration, open } = gated();
    const worker = createWorker({ store, workflows: [registration], concurrency: 1, ...NO_POLL, onEvent: log.onEvent });
    workers.push(worker);
    await worker.start();
    const client = createClient({ store, worker });

    const { runId: held } = await client.start(poison, { label: 'held' });
    await log.waitFor('run-claimed', (e) => e.runId === held);
    const before = statements.length;
    const { runId: queued } = await client.start(poison, { label: 'queued' });
    await waitUntil('the NOTIFY of the second start', () => notifications.includes(queued));
    // Give a (wrong) claim on the notification time to show up.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(statements.slice(before).filter((s) => isLoopClaim(s) || isStartClaim(s))).toEqual([]);
    expect((await runState(getStore(), queued)).run).toMatchObject({ status: 'pending', fencing_token: 0 });

    open();
    await log.waitFor('run-completed', (e) => e.runId === queued);
    expect(statements.slice(before).filter(isLoopClaim)).toHaveLength(1);
    expect(log.errors()).toEqual([]);
  });

  it('a start whose worker does not run (or serves another workflow) is a plain start: pending, NOTIFY at commit', async () => {
    const { store, notifications } = observed(getStore());
    const stopped = createWorker({ store, workflows: [poisonHandlers('never')], ...NO_POLL });
    const client = createClient({ store, worker: stopped });
    const listening = createWorker({ store, workflows: [poisonHandlers('listener')], concurrency: 1, ...NO_POLL });
    workers.push(listening);
    const log = eventLog();
    // Only to receive the NOTIFY: a worker that is not the client's.
    const other = createWorker({ store, workflows: [poisonHandlers('other')], ...NO_POLL, onEvent: log.onEvent });
    workers.push(other);
    await other.start();
    const { runId } = await client.start(poison, { label: 'plain' });
    await waitUntil('the NOTIFY of the plain start', () => notifications.includes(runId));
    await log.waitFor('run-completed', (e) => e.runId === runId);
    const { attempts } = await runState(getStore(), runId);
    expect(attempts.map((a) => a.worker_id)).toEqual([other.id]);
  });

  it('a start whose transaction fails leaves no run and gives its slot back', async () => {
    const { store, statements, failNextStartClaim } = observed(getStore());
    const log = eventLog();
    const worker = createWorker({ store, workflows: [poisonHandlers('local')], concurrency: 1, ...NO_POLL, onEvent: log.onEvent });
    workers.push(worker);
    await worker.start();
    const client = createClient({ store, worker });
    const runId = '00000000-0000-4000-8000-0000000000f1';
    failNextStartClaim();
    await expect(client.start(poison, { label: 'failing' }, { runId })).rejects.toThrow(/start claim failed/);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE id = ${runId}`.execute(getStore().db);
    expect(rows[0]?.n).toBe(0);

    const before = statements.length;
    const again = await client.startAndWait(poison, { label: 'failing' }, { runId, wait: { timeoutMs: 10_000 } });
    expect(again.status).toBe('completed');
    expect(statements.slice(before).filter(isStartClaim)).toHaveLength(1);
    expect(log.errors()).toEqual([]);
  });

  it('refuses a worker created over another store', () => {
    const store = getStore();
    const worker = createWorker({ store: { ...store }, workflows: [poisonHandlers('x')] });
    expect(() => createClient({ store, worker })).toThrow(/the worker was created over another store; pass the same store/);
  });

  it('runs started while three workers idle are all picked up promptly, one claim per idle worker and notification', async () => {
    const fleet = [observed(getStore()), observed(getStore()), observed(getStore())];
    const log = eventLog();
    for (const [i, { store }] of fleet.entries()) {
      const worker = createWorker({ store, workflows: [poisonHandlers(`w${i}`)], concurrency: 4, ...NO_POLL, onEvent: log.onEvent });
      workers.push(worker);
      await worker.start();
    }
    const client = createClient({ store: getStore() });
    const before = fleet.map((f) => f.statements.length);
    const started = performance.now();
    const starts = 6;
    for (let i = 0; i < starts; i += 1) {
      const { runId } = await client.start(poison, { label: `idle-${i}` });
      await log.waitFor('run-completed', (e) => e.runId === runId);
    }
    expect(performance.now() - started).toBeLessThan(5_000);
    const claims = fleet.map((f, i) => f.statements.slice(before[i]).filter(isLoopClaim).length);
    // At most one claim per idle worker and notification (the herd that remains for starts without
    // a local worker): before, each run that ended also woke its worker to claim again. (Fewer
    // when a worker's completion commit carried a fused claim that the notification found in flight.)
    expect(claims.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(fleet.length * starts + 2);
    expect(claims.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(starts);
    expect(log.errors()).toEqual([]);
  });
});
