import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createWorker, type Worker, type WorkerOptions } from 'ledgerflow/runtime';
import { runReconcilePass } from 'ledgerflow/operator';
import { configureFaults } from 'ledgerflow/testing';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { eventLog, startTestRun, runState, waitUntil } from './fixtures/run-helpers.js';
import { gate, gatedHandlers, receiptControl, receiptHandlers } from './fixtures/test-handlers.js';
import { ALL_TEST_WORKFLOWS, gated, receipt } from './fixtures/test-workflows.js';

/**
 * Leases, takeovers and reconciliation under a skewed worker clock. (Retry backoff under skew
 * is covered in worker-concurrency.test.ts.) Only PostgreSQL: PGlite takes `now()` from the
 * very process whose clock is skewed, so it cannot tell the two clocks apart.
 *
 * The worker's clock is moved by faking `Date` in this process; the server's is untouched.
 */
const SIX_HOURS = 6 * 3_600_000;
const LEASE_MS = 1_000;
const FAST: Partial<WorkerOptions> = {
  pollIntervalMs: 20,
  leaseMs: LEASE_MS,
  heartbeatMs: 200,
  reconcileIntervalMs: 0,
};

function skewClock(offsetMs: number): void {
  vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
  vi.setSystemTime(new Date(Date.now() + offsetMs));
}

describe('clock skew: leases and reconciliation follow the database clock [pg]', () => {
  let store: TestStore;
  const workers: Worker[] = [];
  const worker = (options: Omit<WorkerOptions, 'store'>): Worker => {
    const w = createWorker({ store, ...FAST, ...options });
    workers.push(w);
    return w;
  };
  const dbNow = async (): Promise<number> => {
    const { rows } = await sql<{ now: Date }>`SELECT now() AS now`.execute(store.db);
    return rows[0]!.now.getTime();
  };
  // Remaining from clock_timestamp(), read after the statement's snapshot: now() is the reading
  // transaction's start, which can precede a renewal this statement still sees (the renewal
  // committing between the read's Parse and Execute), and read 0.2 ms over the lease.
  const lease = async (runId: string) => {
    const { rows } = await sql<{ owner: string | null; token: number; remaining_ms: number | null }>`
      SELECT lease_owner AS owner, fencing_token AS token,
             (extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000)::float8 AS remaining_ms
        FROM ledgerflow.workflow_run WHERE id = ${runId}`.execute(store.db);
    return rows[0]!;
  };

  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, ALL_TEST_WORKFLOWS);
  });
  afterEach(async () => {
    vi.useRealTimers();
    configureFaults(undefined);
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
  });
  afterAll(async () => {
    await store.close();
  });

  it.each([
    ['six hours ahead', SIX_HOURS],
    ['six hours behind', -SIX_HOURS],
  ])(
    'a worker whose clock is %s holds its lease for leaseMs of database time, renewed by database time',
    async (_label, offset) => {
      skewClock(offset);
      const held = gate();
      const runId = await startTestRun(store, gated, { label: 'skewed-lease' });
      const w = worker({ workflows: [gatedHandlers('skewed', [held])], workerId: 'skewed-worker' });
      await w.start();
      await held.entered;

      const first = await lease(runId);
      expect(first.owner).toBe('skewed-worker');
      expect(first.remaining_ms).toBeGreaterThan(0);
      expect(first.remaining_ms).toBeLessThanOrEqual(LEASE_MS);

      // Outlive the first lease by a wide margin: only renewals in database time keep it alive.
      const until = (await dbNow()) + 3 * LEASE_MS;
      await waitUntil('three lease periods of database time', async () => (await dbNow()) >= until, 20_000);
      const later = await lease(runId);
      expect(later.owner).toBe('skewed-worker');
      expect(later.token).toBe(first.token);
      expect(later.remaining_ms).toBeGreaterThan(0);
      expect(later.remaining_ms).toBeLessThanOrEqual(LEASE_MS);

      held.open();
      await w.drain();
      const { run, attempts } = await runState(store, runId);
      expect(run.status).toBe('completed');
      expect(run.fencing_token).toBe(first.token);
      expect(attempts.map((a) => [a.step_name, a.attempt, a.status])).toEqual([
        ['wait', 1, 'succeeded'],
        ['after', 1, 'succeeded'],
      ]);
    },
  );

  it('a worker whose clock runs ahead leaves a lease that is live in database time alone', async () => {
    // Another worker holds this run for an hour of database time.
    const heldRun = await startTestRun(store, gated, { label: 'held-elsewhere' });
    await sql`
      WITH claimed AS (
        UPDATE ledgerflow.workflow_run
           SET status = 'running', lease_owner = 'other-worker', lease_expires_at = now() + interval '1 hour',
               fencing_token = fencing_token + 1
         WHERE id = ${heldRun} RETURNING id, fencing_token)
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id)
      SELECT id, 'wait', 1, 'running', fencing_token, 'other-worker' FROM claimed`.execute(store.db);
    const freeRun = await startTestRun(store, gated, { label: 'free' });

    skewClock(SIX_HOURS);
    const log = eventLog();
    const w = worker({ workflows: [gatedHandlers('ahead')], onEvent: log.onEvent });
    await w.start();
    await log.waitFor('run-completed', (e) => e.runId === freeRun);
    // Twenty more claim polls, each of which would take the held run if it trusted this clock.
    await new Promise((resolve) => setTimeout(resolve, 20 * FAST.pollIntervalMs!));
    await w.stop();

    const held = await lease(heldRun);
    expect(held.owner).toBe('other-worker');
    expect(held.token).toBe(1);
    expect(log.events.filter((e) => e.type === 'run-claimed' && e.runId === heldRun)).toEqual([]);
    const { attempts } = await runState(store, heldRun);
    expect(attempts.map((a) => [a.attempt, a.status, a.worker_id])).toEqual([[1, 'running', 'other-worker']]);

    // The imaginary owner is done with it; later tests drain the database.
    await sql`
      WITH cancelled AS (
        UPDATE ledgerflow.workflow_run
           SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = now()
         WHERE id = ${heldRun} RETURNING id)
      UPDATE ledgerflow.step_attempt SET status = 'abandoned', finished_at = now()
       WHERE run_id IN (SELECT id FROM cancelled) AND status = 'running'`.execute(store.db);
  });

  it('a worker whose clock runs behind takes over a lease as soon as it expired in database time', async () => {
    const runId = await startTestRun(store, gated, { label: 'expired-elsewhere' });
    await sql`
      WITH claimed AS (
        UPDATE ledgerflow.workflow_run
           SET status = 'running', lease_owner = 'dead-worker', lease_expires_at = now() - interval '1 second',
               fencing_token = fencing_token + 1
         WHERE id = ${runId} RETURNING id, fencing_token)
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id)
      SELECT id, 'wait', 1, 'running', fencing_token, 'dead-worker' FROM claimed`.execute(store.db);

    skewClock(-SIX_HOURS);
    const w = worker({ workflows: [gatedHandlers('behind')], workerId: 'behind-worker' });
    await w.drain({ timeoutMs: 10_000 });

    const { run, attempts } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(run.fencing_token).toBe(2);
    expect(attempts.map((a) => [a.step_name, a.attempt, a.status, a.worker_id])).toEqual([
      ['wait', 1, 'abandoned', 'dead-worker'],
      ['wait', 2, 'succeeded', 'behind-worker'],
      ['after', 1, 'succeeded', 'behind-worker'],
    ]);
  });

  it('a reconciler whose clock runs ahead does not reconcile an intent before it is due in database time', async () => {
    const email = new FakeEmailProvider();
    const control = receiptControl();
    const registration = receiptHandlers(email, control);
    // A worker that stops right after its intent commit: the state a crash there leaves.
    configureFaults({
      seed: 7,
      points: { 'after-intent-commit': { probability: 1, actions: ['hang'], hangMs: 2_000, times: 1 } },
    });
    const runId = await startTestRun(store, receipt, { orderId: 'skew-1', email: 'a@example.com' });
    const log = eventLog();
    const crashing = worker({ workflows: [registration], onEvent: log.onEvent });
    await crashing.start();
    await waitUntil('the intent', async () => {
      const { effects } = await runState(store, runId);
      return effects.some((e) => e.status === 'intent') || undefined;
    });
    await crashing.stop({ timeoutMs: 50 });
    configureFaults(undefined);

    skewClock(SIX_HOURS);
    const early = await runReconcilePass({ store, workflows: [registration], leaseMs: LEASE_MS });
    expect(control.reconcileCalls).toBe(0);
    expect(early.items).toEqual([]);
    expect((await runState(store, runId)).effects.map((e) => e.status)).toEqual(['intent']);

    // Due once intent_at + lease + perform timeout (500 ms) have passed on the server's clock.
    const { effects } = await runState(store, runId);
    const dueAt = effects[0]!.intent_at.getTime() + LEASE_MS + 500;
    await waitUntil('the intent to fall due in database time', async () => (await dbNow()) > dueAt, 20_000);
    vi.setSystemTime(new Date(Date.now() - 2 * SIX_HOURS));
    const due = await runReconcilePass({ store, workflows: [registration], leaseMs: LEASE_MS });
    expect(control.reconcileCalls).toBe(1);
    expect(due.items.map((i) => i.outcome)).toEqual(['released']);
    expect(email.totalSent()).toBe(0);
  });
});
