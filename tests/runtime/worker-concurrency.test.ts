import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker, MigrationError, type Worker, type WorkerOptions } from 'ledgerflow/runtime';
import { configureFaults, onFaultFired } from 'ledgerflow/testing';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { appRows, eventLog, startTestRun, runState, setupAppSchema } from './fixtures/run-helpers.js';
import {
  flakyHandlers,
  gate,
  gatedHandlers,
  gatedWriteHandlers,
  lockWaitWriteHandlers,
  mixedHandlers,
  nulErrorHandlers,
  slowStepHandlers,
  slowWriteHandlers,
} from './fixtures/test-handlers.js';
import {
  ALL_TEST_WORKFLOWS,
  flaky,
  gated,
  gatedWrite,
  mixed,
  nulError,
  slowStep,
  slowWrite,
} from './fixtures/test-workflows.js';

const FAST: Partial<WorkerOptions> = { pollIntervalMs: 20, leaseMs: 5_000, reconcileIntervalMs: 0 };

/** Stalls every lease renewal in this process, as a paused (GC, SIGSTOP) worker would. */
const stallHeartbeats = (): void =>
  configureFaults({
    seed: 1,
    points: { 'before-lease-renewal': { probability: 1, actions: ['hang'], hangMs: 1_500 } },
  });

const _leaseExpired = (store: TestStore, runId: string) => async (): Promise<boolean> => {
  const { rows } = await sql<{ expired: boolean }>`
    SELECT lease_expires_at <= now() AS expired FROM ledgerflow.workflow_run WHERE id = ${runId}`.execute(store.db);
  return rows[0]?.expired === true;
};

describeStores('worker: concurrency, zombies, clocks and shutdown', (getStore) => {
  const workers: Worker[] = [];
  const worker = (options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({ store: getStore(), ...FAST, ...options });
    workers.push(w);
    return w;
  };
  beforeAll(async () => {
    await migrateForTest(getStore(), ALL_TEST_WORKFLOWS);
    await setupAppSchema(getStore());
  });
  afterEach(async () => {
    configureFaults(undefined);
    vi.useRealTimers();
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
  });

  it('several workers racing over the same runs commit each step exactly once', async () => {
    const store = getStore();
    const payments = new FakePaymentProvider();
    const email = new FakeEmailProvider();
    const ids = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        startTestRun(store, mixed, { orderId: `race-${i}`, quantity: 1 + i, email: `r${i}@example.com` }),
      ),
    );
    const logs = [eventLog(), eventLog(), eventLog()];
    const racers = logs.map((log, i) =>
      worker({
        workflows: [mixedHandlers(payments, email, `w${i}`)],
        concurrency: 3,
        workerId: `racer-${i}`,
        onEvent: log.onEvent,
      }),
    );
    await Promise.all(racers.map((w) => w.drain()));

    for (const id of ids) {
      const { run, attempts, results, effects } = await runState(store, id);
      expect(run.status).toBe('completed');
      expect(
        attempts
          .filter((a) => a.status === 'succeeded')
          .map((a) => a.step_name)
          .sort(),
      ).toEqual(['charge', 'price', 'receipt', 'reserve']);
      expect(results).toHaveLength(4);
      expect(effects.every((e) => e.status === 'recorded')).toBe(true);
      expect(await appRows(store, id)).toHaveLength(1);
      const order = (run.input as { orderId: string }).orderId;
      expect(payments.chargesForKey(`charge:${order}`)).toBe(1);
      expect(email.sentForReference(`receipt:${order}`)).toBe(1);
      const chargeEffect = effects.find((e) => e.step_name === 'charge')!;
      expect(chargeEffect.effect).toEqual({ chargeId: payments.charges().find((c) => c.reference === order)!.id });
    }
    const claims = logs.flatMap((l) => l.events).filter((e) => e.type === 'run-claimed');
    expect(claims).toHaveLength(10);
    expect(new Set(claims.map((c) => (c.type === 'run-claimed' ? c.runId : ''))).size).toBe(10);
    expect(logs.flatMap((l) => l.errors())).toEqual([]);
  });

  it('a handler still running when its lease is lost is abandoned at once; its late return commits nothing', async () => {
    const store = getStore();
    stallHeartbeats();
    const held = gate();
    const zombieLog = eventLog();
    const calls = { n: 0 };
    // The first call ignores its signal and sleeps past the lease (the heartbeat is stalled too).
    const zombie = worker({
      workflows: [gatedHandlers('zombie', [held], calls)],
      concurrency: 1,
      leaseMs: 300,
      heartbeatMs: 100,
      onEvent: zombieLog.onEvent,
    });
    const runId = await startTestRun(store, gated, { label: 'zombie' });
    await zombie.start();
    await held.entered;
    await zombieLog.waitFor('lease-lost', (e) => e.runId === runId);
    // The attempt was given up while the handler was still blocked: the slot is free again and
    // the run is taken over — here by the same worker, under a new fencing token.
    await zombie.drain();
    held.open();
    await new Promise((resolve) => setTimeout(resolve, 100));

    const { run, attempts, results } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(calls.n).toBe(2);
    expect(results.map((r) => r.step_name)).toEqual(['wait', 'after']);
    expect(attempts.map((a) => `${a.step_name}:${a.attempt}:${a.status}`)).toEqual([
      'wait:1:abandoned',
      'wait:2:succeeded',
      'after:1:succeeded',
    ]);
    expect(attempts[0]!.error).toMatchObject({ name: 'LeaseExpired' });
    expect(attempts[1]!.fencing_token).toBe(attempts[0]!.fencing_token + 1);
    expect(zombieLog.events.filter((e) => e.type === 'step-succeeded' && e.attempt === 1 && e.step === 'wait')).toEqual(
      [],
    );
  });

  it('a step handler past its timeoutMs fails as retryable (HandlerTimeoutError); the retry completes the run', async () => {
    const store = getStore();
    const calls = { n: 0 };
    const runId = await startTestRun(store, slowStep, { sleepMs: 1_000 });
    await worker({ workflows: [slowStepHandlers(calls)] }).drain();
    const { run, attempts } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(
      attempts.map((a) => `${a.attempt}:${a.status}:${(a.error as { name?: string } | null)?.name ?? ''}`),
    ).toEqual(['1:failed:HandlerTimeoutError', '2:succeeded:']);
    expect(calls.n).toBe(2);
  });

  it('an error whose message jsonb refuses (U+0000, a lone surrogate) is recorded escaped: one attempt, the run fails at once', async () => {
    const store = getStore();
    const calls = { n: 0 };
    const log = eventLog();
    const runId = await startTestRun(store, nulError, {});
    await worker({ workflows: [nulErrorHandlers(calls)], onEvent: log.onEvent }).drain();
    const { run, attempts } = await runState(store, runId);
    expect(calls.n).toBe(1);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ name: 'Error', message: 'bad byte \\u0000 and \\ud800 in the message' });
    expect(attempts.map((a) => `${a.attempt}:${a.status}`)).toEqual(['1:failed']);
    expect(log.errors()).toEqual([]);
  });

  it('stop() lets an in-flight step finish, commits it and gives the run back', async () => {
    const store = getStore();
    const held = gate();
    const log = eventLog();
    const first = worker({ workflows: [gatedHandlers('first', [held])], onEvent: log.onEvent });
    const runId = await startTestRun(store, gated, { label: 'graceful' });
    await first.start();
    await held.entered;
    const stopping = first.stop({ timeoutMs: 10_000 });
    held.open();
    await stopping;

    const { run, attempts } = await runState(store, runId);
    expect(run).toMatchObject({ status: 'pending', current_step: 1, lease_owner: null });
    expect(attempts.map((a) => `${a.step_name}:${a.status}`)).toEqual(['wait:succeeded']);
    expect(log.events.map((e) => e.type)).toContain('run-released');
  });

  it('stop() past its timeout aborts the handler and releases the lease; nothing the handler returns later commits', async () => {
    const store = getStore();
    const held = gate();
    const runId = await startTestRun(store, gated, { label: 'abrupt' });
    const first = worker({ workflows: [gatedHandlers('first', [held])] });
    await first.start();
    await held.entered;
    await first.stop({ timeoutMs: 50 });

    const afterStop = await runState(store, runId);
    expect(afterStop.run).toMatchObject({ status: 'pending', lease_owner: null, current_step: 0 });
    expect(afterStop.attempts.map((a) => [a.status, (a.error as { name?: string } | null)?.name])).toEqual([
      ['abandoned', 'WorkerStopped'],
    ]);
    held.open();

    await worker({ workflows: [gatedHandlers('second')] }).drain();
    const { run, results } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(results.find((r) => r.step_name === 'wait')!.output).toEqual({ by: 'second' });
  });
});

describe('worker: clock skew [pg]', () => {
  // PGlite runs inside the worker's process and takes now() from that process's clock, so only
  // a separate server can show that the worker's own clock does not matter.
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, ALL_TEST_WORKFLOWS);
  });
  afterAll(async () => {
    vi.useRealTimers();
    await store.close();
  });

  it.each([
    ['ten years ahead', '2037-06-01T00:00:00Z'],
    ['ten years behind', '2016-06-01T00:00:00Z'],
  ])(
    'a worker whose clock is %s behaves identically: retries and times follow the database',
    async (_label, skewedNow) => {
      vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
      vi.setSystemTime(new Date(skewedNow));
      const runId = await startTestRun(store, flaky, { failTimes: 2, error: 'plain' });
      const w = createWorker({ store, ...FAST, workflows: [flakyHandlers(new Map())] });
      try {
        await w.drain();
      } finally {
        await w.stop();
        vi.useRealTimers();
      }

      const { run, attempts } = await runState(store, runId);
      const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(store.db);
      const dbNow = rows[0]!.now.getTime();
      expect(run.status).toBe('completed');
      expect(attempts.map((a) => a.status)).toEqual(['failed', 'failed', 'succeeded']);
      expect(attempts.slice(0, 2).map((a) => a.next_eligible_at!.getTime() - a.finished_at!.getTime())).toEqual([
        20, 40,
      ]);
      for (const attempt of attempts) {
        expect(Math.abs(attempt.started_at.getTime() - dbNow)).toBeLessThan(60_000);
        expect(Math.abs(attempt.finished_at!.getTime() - dbNow)).toBeLessThan(60_000);
      }
    },
  );
});

describe('worker: start-up checks', () => {
  let store: TestStore;
  const unmigrated = workflow('wt-unmigrated', { version: 1, input: z.object({}) }).step('a', { output: z.object({}) });
  const drifted = workflow('wt-drifted', { version: 1, input: z.object({}) }).step('a', { output: z.object({}) });
  const register = (w: typeof unmigrated | typeof drifted) => bindHandlers(w, { a: () => ({}) }, shapeHash(w));
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [drifted]);
    await sql`UPDATE ledgerflow.workflow_version SET definition_hash = 'feedfacefeedface' WHERE workflow_name = 'wt-drifted'`.execute(
      store.db,
    );
  });
  afterAll(() => store.close());

  it('refuses a workflow version that is not migrated', async () => {
    const w = createWorker({ store, workflows: [register(unmigrated)] });
    await expect(w.start()).rejects.toThrow(MigrationError);
    await expect(w.start()).rejects.toThrow('workflow "wt-unmigrated" v1 is not migrated (run `ledgerflow migrate`)');
  });

  it('refuses a workflow whose migrated definition differs from the code', async () => {
    const w = createWorker({ store, workflows: [register(drifted)] });
    await expect(w.start()).rejects.toThrow(
      /migrated as feedfacefeedface but the code is [0-9a-f]{16} \(run `ledgerflow codegen` then `ledgerflow migrate`/,
    );
  });

  it('rejects nonsense options with what to fix', () => {
    expect(() => createWorker({ store, workflows: [register(drifted)], leaseMs: 1_000, heartbeatMs: 1_000 })).toThrow(
      'Invalid worker options: heartbeatMs must be > 0 and < leaseMs (got 1000 with leaseMs 1000).',
    );
    expect(() => createWorker({ store, workflows: [] })).toThrow('workflows is empty');
  });
});

describe('worker: transactional zombie [pg]', () => {
  // PGlite has one connection, so a transaction that sleeps blocks every other worker and a
  // zombie in a transactional handler cannot be overtaken there; on PostgreSQL it can.
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, ALL_TEST_WORKFLOWS);
    await setupAppSchema(store);
  });
  afterAll(async () => {
    configureFaults(undefined);
    await store.close();
  });

  /**
   * Expires the run's lease in the database, as a worker that stopped renewing would leave it —
   * only while `owner` holds it: an expiry that lands just after the successor's claim would
   * otherwise hand the run back to the zombie's worker (its slot is free once its flight was
   * abandoned), which then sits in the gate holding a lease it renews.
   */
  const expireLease = (runId: string, owner: string) =>
    sql`UPDATE ledgerflow.workflow_run SET lease_expires_at = now() - interval '1 second'
         WHERE id = ${runId} AND lease_owner = ${owner}`.execute(store.db);

  for (const stuck of ['in its handler', 'in a statement'] as const) {
    it(`a zombie stuck ${stuck} after writing is ended when its lease is lost: the successor is not blocked and writes once`, async () => {
      const held = gate();
      const zombieLog = eventLog();
      // The zombie's heartbeat works: it learns of the loss at its next renewal (100 ms).
      const zombie = createWorker({
        store,
        ...FAST,
        workflows: [
          stuck === 'in its handler' ? gatedWriteHandlers('zombie', held) : lockWaitWriteHandlers('zombie', held),
        ],
        concurrency: 1,
        leaseMs: 3_000,
        heartbeatMs: 100,
        workerId: `zombie-${stuck.replace(/ /g, '-')}`,
        onEvent: zombieLog.onEvent,
      });
      const orderId = `tx-zombie-${stuck.replace(/ /g, '-')}`;
      const runId = await startTestRun(store, gatedWrite, { orderId });
      await zombie.start();
      await held.entered;

      // The zombie's transaction holds its ledger row; a successor that takes the run over
      // inserts the same key and waits on it — until the zombie's transaction ends. The zombie's
      // heartbeat still renews an expired lease nobody has taken (by its token), so on a loaded
      // machine it can win the race against one expiry: expire it until the successor holds it.
      const successorLog = eventLog();
      const successor = createWorker({
        store,
        ...FAST,
        workflows: [gatedWriteHandlers('successor')],
        leaseMs: 30_000,
        onEvent: successorLog.onEvent,
      });
      const started = performance.now();
      await successor.start();
      const takenOver = successorLog.waitFor('run-claimed', (e) => e.runId === runId);
      let claimed = false;
      void takenOver.then(() => (claimed = true));
      while (!claimed) {
        await expireLease(runId, `zombie-${stuck.replace(/ /g, '-')}`);
        await Promise.race([takenOver, new Promise((resolve) => setTimeout(resolve, 50))]);
      }
      await successor.drain({ timeoutMs: 20_000 });
      const waited = performance.now() - started;
      await zombieLog.waitFor('lease-lost', (e) => e.runId === runId);
      held.open();
      await Promise.all([zombie.stop({ timeoutMs: 500 }), successor.stop()]);

      const { run, effects, attempts } = await runState(store, runId);
      const rows = await appRows(store, runId);
      expect(run.status).toBe('completed');
      expect(rows.map((r) => r.written_by)).toEqual(['successor']);
      expect(effects).toEqual([
        expect.objectContaining({ status: 'recorded', attempt: 2, effect: { rowId: rows[0]!.id, by: 'successor' } }),
      ]);
      expect(attempts.map((a) => `${a.attempt}:${a.status}`)).toEqual(['1:abandoned', '2:succeeded']);
      // Bounded by the zombie noticing (a heartbeat), not by the zombie's handler, which never returned.
      expect(waited).toBeLessThan(10_000);
      const sessions = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`.execute(
        store.db,
      );
      expect(sessions.rows[0]!.n).toBe(0);
    });
  }

  it('a transactional handler longer than the lease keeps it: the commit extends the lease from its own time, not the transaction start', async () => {
    const log = eventLog();
    const rivalLog = eventLog();
    const runId = await startTestRun(store, slowWrite, { orderId: 'tx-slow', sleepMs: 1_500 });
    // Lease 1 s, renewed every 300 ms while the handler runs 1.5 s; a rival polls every 20 ms for
    // expired leases. The next step takes 400 ms: if the commit had set the lease from the
    // transaction's start, it would already be in the past, and the rival would take the run.
    const owner = createWorker({
      store,
      ...FAST,
      workflows: [slowWriteHandlers('owner')],
      leaseMs: 1_000,
      heartbeatMs: 300,
      concurrency: 1,
      onEvent: log.onEvent,
    });
    await owner.start();
    await log.waitFor('run-claimed', (e) => e.runId === runId);
    const rival = createWorker({
      store,
      ...FAST,
      workflows: [slowWriteHandlers('rival')],
      leaseMs: 1_000,
      heartbeatMs: 300,
      onEvent: rivalLog.onEvent,
    });
    await rival.start();
    await log.waitFor('run-completed', (e) => e.runId === runId);
    await Promise.all([owner.stop(), rival.stop()]);

    const { attempts, results } = await runState(store, runId);
    expect(attempts.map((a) => `${a.step_name}:${a.attempt}:${a.status}`)).toEqual([
      'write:1:succeeded',
      'after:1:succeeded',
    ]);
    expect(results.map((r) => r.output)).toEqual([{ by: 'owner' }, { by: 'owner' }]);
    expect(rivalLog.events.filter((e) => e.type === 'run-claimed')).toEqual([]);
    expect(log.events.filter((e) => e.type === 'lease-lost')).toEqual([]);
    expect(await appRows(store, runId)).toHaveLength(1);
  });

  it('a transactional handler past its timeoutMs is rolled back and retried; only the retry writes', async () => {
    const log = eventLog();
    const runId = await startTestRun(store, slowWrite, { orderId: 'tx-timeout', sleepMs: 2_000 });
    const w = createWorker({
      store,
      ...FAST,
      workflows: [slowWriteHandlers('w', { sleepOnce: true })],
      onEvent: log.onEvent,
    });
    await w.drain();
    await w.stop();
    const { run, attempts } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(
      attempts
        .filter((a) => a.step_name === 'write')
        .map((a) => `${a.attempt}:${a.status}:${(a.error as { name?: string } | null)?.name ?? ''}`),
    ).toEqual(['1:failed:HandlerTimeoutError', '2:succeeded:']);
    expect(await appRows(store, runId)).toHaveLength(1);
  });

  // The failover test's finding, made deterministic. The handler's first statement opens the
  // step's transaction: BEGIN, then the ledger row. Between the two, the worker stops hearing
  // from the database (its renewals hang) and its watchdog gives the lease up, while the
  // database still holds it (a renewal that landed but whose answer was lost). Abandoning the
  // step must not let the opening go on after its ROLLBACK: a ledger row inserted then commits
  // on its own, passes the fence, and says "recorded" for a write that never happened. A
  // pipelining store sends BEGIN with the ledger row, after the fault point; a store that sends
  // one statement at a time (PGlite, a pooler, `pipeline: false`) has BEGIN on the server while
  // the opening hangs: both ways are run.
  it.each([
    ['pipelining', true],
    ['sending one statement at a time (BEGIN already sent when it hangs)', false],
  ] as const)(
    'a transactional step abandoned while its transaction is still opening commits nothing of it, ledger row included — %s',
    async (_, pipeline) => {
      const workerStore = createPgStore({ connectionString: store.url!, pipeline, maxConnections: 6 });
      expect(workerStore.pipelines === true).toBe(pipeline);
      const log = eventLog();
      const runId = await startTestRun(store, slowWrite, {
        orderId: `tx-abandoned-opening-${pipeline}`,
        sleepMs: 0,
      });
      configureFaults({
        seed: 7,
        points: {
          'opening-step-transaction': { probability: 1, actions: ['hang'], hangMs: 2_000, times: 1 },
          'before-lease-renewal': { probability: 1, actions: ['hang'], hangMs: 2_500, times: 1 },
        },
      });
      const extended = new Promise<void>((resolve) => {
        const off = onFaultFired((firing) => {
          if (firing.point !== 'opening-step-transaction') return;
          off();
          void sql`UPDATE ledgerflow.workflow_run SET lease_expires_at = now() + interval '4 seconds' WHERE id = ${runId}`
            .execute(store.db)
            .then(() => resolve());
        });
      });
      const w = createWorker({
        store: workerStore,
        ...FAST,
        workflows: [slowWriteHandlers('w')],
        leaseMs: 1_000,
        heartbeatMs: 200,
        onEvent: log.onEvent,
      });
      await w.start();
      await extended;
      await log.waitFor('run-completed', (e) => e.runId === runId);
      await w.stop();
      await workerStore.close();
      const { run, attempts, effects } = await runState(store, runId);
      expect(run.status).toBe('completed');
      expect(attempts.filter((a) => a.step_name === 'write').map((a) => `${a.attempt}:${a.status}`)).toEqual([
        '1:abandoned',
        '2:succeeded',
      ]);
      expect(effects.filter((e) => e.step_name === 'write').map((e) => [e.attempt, e.effect])).toEqual([
        [2, { by: 'w' }],
      ]);
      expect(await appRows(store, runId)).toHaveLength(1);
    },
  );
});

describe('worker: database connections killed under it [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, ALL_TEST_WORKFLOWS);
    await setupAppSchema(store);
  });
  afterAll(() => store.close());

  it('survives pg_terminate_backend on its connections and still commits every step exactly once', async () => {
    const payments = new FakePaymentProvider({ latencyMs: 5 });
    const email = new FakeEmailProvider({ latencyMs: 5 });
    const ids = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        startTestRun(store, mixed, { orderId: `kill-${i}`, quantity: 1, email: `k${i}@example.com` }),
      ),
    );
    const log = eventLog();
    const w = createWorker({
      store,
      ...FAST,
      workflows: [mixedHandlers(payments, email)],
      concurrency: 4,
      leaseMs: 2_000,
      onEvent: log.onEvent,
    });
    const database = new URL(store.url!).pathname.slice(1);
    const killer = await createPgTestKiller(store, database);
    const drained = w.drain({ timeoutMs: 45_000 });
    let kills = 0;
    for (let i = 0; i < 8; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 40));
      kills += await killer.kill();
    }
    await killer.close();
    await drained;
    await w.stop();

    expect(kills).toBeGreaterThan(0);
    for (const id of ids) {
      const { run, attempts, effects } = await runState(store, id);
      expect(run.status).toBe('completed');
      expect(attempts.filter((a) => a.status === 'succeeded')).toHaveLength(4);
      expect(effects.every((e) => e.status === 'recorded')).toBe(true);
      expect(await appRows(store, id)).toHaveLength(1);
      const order = (run.input as { orderId: string }).orderId;
      expect(payments.chargesForKey(`charge:${order}`)).toBe(1);
      expect(email.sentForReference(`receipt:${order}`)).toBe(1);
    }
  });
});

/**
 * Terminates the worker's backends in `database` from a connection of its own (so the killer is
 * never handed one of the connections it just killed); returns how many.
 */
async function createPgTestKiller(
  store: TestStore,
  database: string,
): Promise<{ kill(): Promise<number>; close(): Promise<void> }> {
  const client = new pg.Client({ connectionString: store.url! });
  await client.connect();
  return {
    async kill() {
      const { rows } = await client.query<{ killed: boolean }>(
        `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
          WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
        [database],
      );
      return rows.filter((r) => r.killed).length;
    },
    close: () => client.end(),
  };
}
