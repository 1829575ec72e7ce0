import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Store, type Worker } from 'ledgerflow/runtime';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { eventLog, runState, startTestRun, waitUntil } from './fixtures/run-helpers.js';
import { poison, poisonHandlers } from './fixtures/poison-workflows.js';

/**
 * The worker's LISTEN connection is its only fast path to new runs. When it breaks (here:
 * pg_terminate_backend on its backend), the worker must notice on its own — not at the next
 * failed claim — and subscribe again. The poll is set to ten minutes, so a run that completes
 * within the test was found through a notification or the re-subscription's own claim.
 */
const NO_POLL = { pollIntervalMs: 600_000, reconcileIntervalMs: 0 } as const;

describe('worker: LISTEN connection lost [pg]', () => {
  let store: TestStore;
  let admin: pg.Client;
  const workers: Worker[] = [];

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [poison]);
    admin = new pg.Client({ connectionString: store.url! });
    await admin.connect();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });
  afterAll(async () => {
    await admin.end();
    await store.close();
  });

  /** The backend that last ran LISTEN in this database (the worker's subscription). */
  const listenerPid = async (): Promise<number | undefined> => {
    const { rows } = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN %'`,
    );
    return rows.length === 1 ? rows[0]!.pid : undefined;
  };

  /** The store, with every notification the worker receives recorded, and subscriptions refusable. */
  const observed = (): { store: Store; payloads: string[]; refuse: (refusing: boolean) => void } => {
    const payloads: string[] = [];
    let refusing = false;
    return {
      payloads,
      refuse: (value) => (refusing = value),
      store: {
        ...store,
        listen: async (channel, onNotify, onLost) => {
          if (refusing) throw new Error('subscription refused by the test');
          return store.listen(
            channel,
            (payload) => {
              payloads.push(payload);
              onNotify(payload);
            },
            onLost,
          );
        },
      },
    };
  };

  it('notices the terminated backend, subscribes again, and a run started afterwards wakes the idle worker', async () => {
    const { store: watched, payloads } = observed();
    const log = eventLog();
    const w = createWorker({
      store: watched,
      workflows: [poisonHandlers('listener')],
      ...NO_POLL,
      onEvent: log.onEvent,
    });
    workers.push(w);
    await w.start();
    const first = await waitUntil('the LISTEN backend', listenerPid);

    const { rows } = await admin.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [first]);
    expect(rows[0]!.ok).toBe(true);
    expect((await log.waitFor('listener-lost')).error.message).toMatch(/terminat|ended/i);
    await log.waitFor('listener-restored');
    const second = await waitUntil('a new LISTEN backend', async () => {
      const pid = await listenerPid();
      return pid !== undefined && pid !== first ? pid : undefined;
    });
    expect(second).not.toBe(first);

    const runId = await startTestRun(store, poison, { label: 'after-termination' });
    await log.waitFor('run-completed', (e) => e.runId === runId);
    expect(payloads).toContain(runId);
    expect((await runState(store, runId)).run.status).toBe('completed');
    expect(log.errors()).toEqual([]);
  });

  it('a run started while nobody listens is claimed as soon as the subscription is back', async () => {
    const { store: watched, payloads, refuse } = observed();
    const log = eventLog();
    const w = createWorker({ store: watched, workflows: [poisonHandlers('gap')], ...NO_POLL, onEvent: log.onEvent });
    workers.push(w);
    await w.start();
    const pid = await waitUntil('the LISTEN backend', listenerPid);

    refuse(true);
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    await log.waitFor('listener-lost');
    // Re-subscribing fails (and backs off) while the run is started: its NOTIFY reaches no one.
    await log.waitFor('error', (e) => e.where === 'listen');
    const runId = await startTestRun(store, poison, { label: 'in-the-gap' });
    expect(await runState(store, runId)).toMatchObject({ run: { status: 'pending' } });
    refuse(false);

    const restored = await log.waitFor('listener-restored');
    expect(restored.failedAttempts).toBeGreaterThanOrEqual(1);
    await log.waitFor('run-completed', (e) => e.runId === runId);
    expect(payloads).not.toContain(runId);
  });
});
