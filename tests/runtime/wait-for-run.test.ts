import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createClient, createWorker, WaitTimeoutError, type Client, type Worker } from 'ledgerflow/runtime';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import type { Store } from '../../runtime/store/store.js';
import { RUN_SETTLED_CHANNEL } from '../../runtime/store/channels.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { waitUntil } from './fixtures/run-helpers.js';
import { flakyHandlers, twoStepsHandlers } from './fixtures/test-handlers.js';
import { flaky, twoSteps } from './fixtures/test-workflows.js';

/**
 * `waitForRun` and `startAndWait` sleep until the run's settling transaction NOTIFYs (core 0011).
 * The polls and the timeout are set to ten minutes, so a wait that returns within the test was
 * woken by the notification (`woken` fails the test after 10 s: a guard, not a latency bound).
 * Every notification on the channel is recorded by a listener of the test's own, to show that
 * only watched runs notify.
 */
const NOTIFIED_ONLY = { timeoutMs: 600_000, pollMs: 600_000, recheckMs: 600_000 } as const;

async function woken<T>(wait: Promise<T>): Promise<T> {
  let guard: NodeJS.Timeout | undefined;
  const notWoken = new Promise<never>((_, reject) => {
    guard = setTimeout(() => reject(new Error('the wait was not woken by a notification within 10 s')), 10_000);
  });
  try {
    return await Promise.race([wait, notWoken]);
  } finally {
    clearTimeout(guard);
  }
}

describeStores('waitForRun: woken by the settling commit', (getStore) => {
  let client: Client;
  let worker: Worker | undefined;
  const notified: string[] = [];
  let unlisten: (() => Promise<void>) | undefined;
  const calls = new Map<string, number>();

  beforeAll(async () => {
    const store = getStore();
    await migrateForTest(store, [twoSteps, flaky]);
    client = createClient({ store });
    unlisten = await store.listen(RUN_SETTLED_CHANNEL, (payload) => notified.push(payload));
  });
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
  });
  afterAll(async () => {
    await unlisten?.();
  });

  const startWorker = async (): Promise<void> => {
    worker = createWorker({
      store: getStore(),
      workflows: [twoStepsHandlers(), flakyHandlers(calls)],
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      concurrency: 4,
    });
    await worker.start();
  };

  const isMarked = async (runId: string): Promise<boolean> => {
    const row = await getStore()
      .db.selectFrom('ledgerflow.workflow_run')
      .select('notify_settled')
      .where('id', '=', runId)
      .executeTakeFirstOrThrow();
    return row.notify_settled;
  };

  it('waitForRun returns a completed run, woken by its notification', async () => {
    const { runId } = await client.start(twoSteps, { n: 3 });
    expect(await isMarked(runId)).toBe(false);
    const waiting = client.waitForRun(runId, NOTIFIED_ONLY);
    await waitUntil('the run marked as waited for', () => isMarked(runId), 5_000);
    await startWorker();
    const run = await woken(waiting);
    expect(run).toEqual({
      id: runId,
      workflow_name: twoSteps.name,
      workflow_version: twoSteps.version,
      status: 'completed',
      output: { double: { value: 6 }, describe: { text: 'value is 6' } },
      error: null,
    });
    await waitUntil('the notification seen by the test listener too', () => notified.includes(runId), 5_000);
  });

  it('startAndWait inserts the run marked and returns it settled', async () => {
    await startWorker();
    const run = await woken(client.startAndWait(twoSteps, { n: 5 }, { wait: NOTIFIED_ONLY }));
    expect(run).toMatchObject({ status: 'completed' });
    expect(await isMarked(run.id)).toBe(true);
    expect(run.output).toEqual({ double: { value: 10 }, describe: { text: 'value is 10' } });
  });

  it('startAndWait with a dedupe key of an existing run waits for that run', async () => {
    const { runId } = await client.start(twoSteps, { n: 7 }, { dedupeKey: 'saw-existing' });
    const waiting = woken(client.startAndWait(twoSteps, { n: 7 }, { dedupeKey: 'saw-existing', wait: NOTIFIED_ONLY }));
    await waitUntil('the existing run marked as waited for', () => isMarked(runId), 5_000);
    await startWorker();
    const run = await waiting;
    expect(run).toMatchObject({ id: runId, status: 'completed' });
  });

  it('wakes the waiter of a run that fails', async () => {
    await startWorker();
    const run = await woken(
      client.startAndWait(flaky, { failTimes: 1, error: 'non-retryable' }, { wait: NOTIFIED_ONLY }),
    );
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ message: 'refused on call 1' });
  });

  it('wakes the waiter of a run that is cancelled while it waits', async () => {
    const { runId } = await client.start(twoSteps, { n: 1 });
    const waiting = client.waitForRun(runId, NOTIFIED_ONLY);
    await waitUntil('the run marked as waited for', () => isMarked(runId), 5_000);
    expect(await client.cancel(runId)).toBe(true);
    expect((await woken(waiting)).status).toBe('cancelled');
  });

  it('returns at once for a run that settled before the wait, without marking it', async () => {
    const { runId } = await client.start(twoSteps, { n: 2 });
    await client.cancel(runId);
    expect((await woken(client.waitForRun(runId, NOTIFIED_ONLY))).status).toBe('cancelled');
    expect(await isMarked(runId)).toBe(false);
  });

  it('notifies for the watched runs only', async () => {
    const unwatched: string[] = [];
    for (let i = 0; i < 5; i++) unwatched.push((await client.start(twoSteps, { n: 100 + i })).runId);
    await client.cancel((await client.start(twoSteps, { n: 200 })).runId).then(() => {});
    await startWorker();
    const store = getStore();
    await waitUntil(
      'the unwatched runs completed',
      async () => {
        const rows = await store.db
          .selectFrom('ledgerflow.workflow_run')
          .select('status')
          .where('id', 'in', unwatched)
          .execute();
        return rows.every((r) => r.status === 'completed');
      },
      10_000,
    );
    const watched = await woken(client.startAndWait(twoSteps, { n: 300 }, { wait: NOTIFIED_ONLY }));
    // The watched run's notification arrived (it woke the wait); all earlier ones would have arrived before it.
    await waitUntil('the watched run notified', () => notified.includes(watched.id), 5_000);
    expect(notified.filter((id) => unwatched.includes(id))).toEqual([]);
    expect(notified.filter((id) => id === watched.id)).toEqual([watched.id]);
  });

  it('times out as before on a run nobody works on, which goes on', async () => {
    const { runId } = await client.start(twoSteps, { n: 9 });
    const startedAt = Date.now();
    const error = await client
      .waitForRun(runId, { timeoutMs: 100, pollMs: 600_000, recheckMs: 600_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitTimeoutError);
    expect((error as Error).message).toBe(
      `Run ${runId} is still pending after 100 ms; it goes on, wait again or inspect it.`,
    );
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(95);
    expect((await client.getRun(runId)).status).toBe('pending');
  });

  it('refuses bad wait options before anything is written', async () => {
    await expect(client.waitForRun(randomUUID(), { pollMs: 0 })).rejects.toThrow(
      'pollMs must be a number of milliseconds from 1 to 2147483647 (got 0).',
    );
    await expect(client.startAndWait(twoSteps, { n: 1 }, { wait: { timeoutMs: -1 } })).rejects.toThrow(
      'timeoutMs must be a number of milliseconds from 0 to 2147483647 (got -1).',
    );
  });
});

describe('waitForRun: the listening connection lost [pg]', () => {
  let store: TestStore;
  let admin: pg.Client;

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [twoSteps]);
    admin = new pg.Client({ connectionString: store.url! });
    await admin.connect();
  });
  afterAll(async () => {
    await admin.end();
    await store.close();
  });

  it('polls at pollMs while it cannot listen, and hears notifications again once it listens again', async () => {
    const client = createClient({ store });
    const first = await client.start(twoSteps, { n: 1 });
    const waiting = client.waitForRun(first.runId, { timeoutMs: 15_000, pollMs: 50, recheckMs: 600_000 });
    const listenerPid = async (): Promise<number | undefined> => {
      const { rows } = await admin.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = $1`,
        [`LISTEN "${RUN_SETTLED_CHANNEL}"`],
      );
      return rows[0]?.pid;
    };
    await waitUntil('the client listening', async () => (await listenerPid()) !== undefined, 5_000);
    await admin.query('SELECT pg_terminate_backend($1)', [await listenerPid()]);
    // Settled while nobody listens: only the poll can find it.
    await client.cancel(first.runId);
    expect((await waiting).status).toBe('cancelled');

    // Listening again (the retry after the loss, or the next wait's subscribe): woken by the notification.
    const second = await client.start(twoSteps, { n: 2 });
    const worker = createWorker({ store, workflows: [twoStepsHandlers()], pollIntervalMs: 20, reconcileIntervalMs: 0 });
    await worker.start();
    try {
      const run = await woken(client.waitForRun(second.runId, NOTIFIED_ONLY));
      expect(run.status).toBe('completed');
    } finally {
      await worker.stop();
    }
  });

  it('a wait whose connections are lost reads again every pollMs and returns the run once the database answers', async () => {
    const cut = cuttableStore(store.url!);
    const client = createClient({ store: cut.store });
    try {
      const { runId } = await client.start(twoSteps, { n: 3 });
      const waiting = client.waitForRun(runId, { timeoutMs: 30_000, pollMs: 50, recheckMs: 600_000 });
      await waitUntil(
        'the wait marked the run',
        async () => {
          const { rows } = await admin.query<{ notify_settled: boolean }>(
            'SELECT notify_settled FROM ledgerflow.workflow_run WHERE id = $1',
            [runId],
          );
          return rows[0]?.notify_settled === true;
        },
        5_000,
      );
      await cut.down(admin);
      // Completed while the waiter can reach nothing: no notification reaches it, its reads fail.
      const worker = createWorker({
        store,
        workflows: [twoStepsHandlers()],
        pollIntervalMs: 20,
        reconcileIntervalMs: 0,
      });
      await worker.drain();
      await worker.stop();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(cut.refused()).toBeGreaterThan(0);
      cut.up();
      expect((await waiting).status).toBe('completed');
    } finally {
      cut.up();
      await cut.store.close();
    }
  });

  it('a wait that never reaches the database again times out saying so, with the connection error as its cause', async () => {
    const cut = cuttableStore(store.url!);
    const client = createClient({ store: cut.store });
    try {
      const { runId } = await client.start(twoSteps, { n: 4 });
      const waiting = client.waitForRun(runId, { timeoutMs: 1_000, pollMs: 50 });
      await cut.down(admin);
      const error = await waiting.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(WaitTimeoutError);
      expect((error as Error).message).toMatch(
        new RegExp(
          `^Run ${runId}: the database did not answer before the wait's 1000 ms ran out \\(connection cut by the test\\)`,
        ),
      );
      expect((error as Error).cause).toBeInstanceOf(Error);
    } finally {
      cut.up();
      await cut.store.close();
    }
  });
});

/** A pg store the test can cut off: its sessions are ended and every connect and query fails until `up()`. */
function cuttableStore(url: string): {
  store: Store;
  down(admin: pg.Client): Promise<void>;
  up(): void;
  refused(): number;
} {
  let isDown = false;
  let refused = 0;
  const applicationName = `lf-cut-${randomUUID().slice(0, 8)}`;
  const cutError = (): Error => {
    refused += 1;
    return Object.assign(new Error('connection cut by the test'), { code: 'ECONNREFUSED' });
  };
  class CuttableClient extends pg.Client {}
  const connect = pg.Client.prototype.connect as (this: pg.Client, ...args: unknown[]) => unknown;
  const query = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
  CuttableClient.prototype.connect = function (this: pg.Client, ...args: unknown[]) {
    if (!isDown) return connect.apply(this, args);
    const callback = args[0];
    if (typeof callback === 'function') {
      const error = cutError();
      queueMicrotask(() => (callback as (e: Error) => void)(error));
      return undefined;
    }
    return Promise.reject(cutError());
  } as typeof pg.Client.prototype.connect;
  CuttableClient.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    return isDown ? Promise.reject(cutError()) : query.apply(this, args);
  } as typeof pg.Client.prototype.query;
  const store = createPgStore({
    connectionString: url,
    applicationName,
    clientClass: CuttableClient,
    maxConnections: 4,
  });
  return {
    store,
    async down(admin) {
      isDown = true;
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [
        applicationName,
      ]);
    },
    up: () => void (isDown = false),
    refused: () => refused,
  };
}
