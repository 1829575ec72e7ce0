import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Store, type WorkerEvent } from 'ledgerflow/runtime';
import type { LedgerflowDatabase } from 'ledgerflow/schema';
import { INT8_OID, parseInt8 } from '../../runtime/store/store.js';
import { claimRuns } from '../../runtime/worker/claim.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { advanceRun } from '../../runtime/worker/step-commits.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { runState, startTestRun } from './fixtures/run-helpers.js';
import { poison, poisonHandlers } from './fixtures/poison-workflows.js';

/**
 * Fused claims: while a backlog lasts, the commit that completes a run also claims the next
 * runs for the slots it frees, so a run costs its step commits and no claim commit of its own.
 */
describeStores('fused claim in a completion commit', (getStore) => {
  const registry = buildRegistry([poisonHandlers('fused')]);
  beforeAll(() => migrateForTest(getStore(), [poison]));

  it('claims nothing when the completion is fenced out (a zombie), and the next due runs when it is not', async () => {
    const store = getStore();
    const [first, second, third] = [
      await startTestRun(store, poison, { label: 'a' }),
      await startTestRun(store, poison, { label: 'b' }),
      await startTestRun(store, poison, { label: 'c' }),
    ];
    const [held] = await claimRuns(store.db, registry, { workerId: 'fused-worker', leaseMs: 30_000, limit: 1 });
    expect(held?.id).toBe(first);
    const step = poison.steps[0]!;
    const complete = (fencingToken: number) =>
      advanceRun(store.db, {
        lease: { runId: first!, fencingToken, workerId: 'fused-worker', leaseMs: 30_000 },
        workflowName: poison.name,
        workflowVersion: poison.version,
        step,
        attempt: held!.attempt!,
        resultAttempt: held!.attempt!,
        output: { survivedBy: 'fused' },
        continuation: {
          kind: 'complete',
          runOutput: { explode: { survivedBy: 'fused' } },
          claimNext: { registry, options: { workerId: 'fused-worker', leaseMs: 30_000, limit: 2 } },
        },
      });

    const zombie = await complete(held!.fencingToken - 1);
    expect(zombie).toEqual({ fenced: false, nextAttempt: null, claimed: [], overdue: false });
    for (const id of [second, third])
      expect((await runState(store, id!)).run).toMatchObject({ status: 'pending', fencing_token: 0 });

    const done = await complete(held!.fencingToken);
    expect(done.fenced).toBe(true);
    expect(done.claimed?.map((r) => [r.id, r.attempt, r.fencingToken, r.currentStep])).toEqual([
      [second, 1, 1, 0],
      [third, 1, 1, 0],
    ]);
    expect((await runState(store, first!)).run.status).toBe('completed');
    for (const id of [second, third]) {
      const { run, attempts } = await runState(store, id!);
      expect(run).toMatchObject({ status: 'running', lease_owner: 'fused-worker', fencing_token: 1 });
      expect(attempts.map((a) => [a.attempt, a.status, a.worker_id])).toEqual([[1, 'running', 'fused-worker']]);
    }
    await sql`UPDATE ledgerflow.workflow_run SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = now()
               WHERE id IN (${second!}, ${third!})`.execute(store.db);
  });
});

describe('fused claims in a draining worker [pg]', () => {
  let base: TestStore;
  let store: Store;
  const statements: string[] = [];

  beforeAll(async () => {
    base = await createPgTestStore();
    await migrateForTest(base, [poison]);
    const pool = new pg.Pool({
      connectionString: base.url!,
      max: 4,
      types: {
        getTypeParser: ((oid: number, format?: string) =>
          oid === INT8_OID
            ? parseInt8
            : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
      },
    });
    // The database is dropped WITH (FORCE) at the end: an idle client it ends must not crash the test process.
    pool.on('error', () => {});
    const db = new Kysely<LedgerflowDatabase>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => void statements.push(event.query.sql),
    });
    // No NOTIFY and a poll of a minute: only the start-up claim and fused claims can take runs.
    store = { kind: 'pg', db, location: 'logging pool', listen: async () => async () => {}, close: () => db.destroy() };
  });
  afterAll(async () => {
    await store.close();
    await base.close();
  });

  it('takes a backlog of 6 runs with one claim statement; every later run rides on a completion commit', async () => {
    const ids = [];
    for (let i = 0; i < 6; i += 1) ids.push(await startTestRun(base, poison, { label: `backlog-${i}` }));
    const events: WorkerEvent[] = [];
    let completed = 0;
    let allDone!: () => void;
    const done = new Promise<void>((resolve) => (allDone = resolve));
    const worker = createWorker({
      store,
      workflows: [poisonHandlers('fused')],
      concurrency: 2,
      pollIntervalMs: 60_000,
      reconcileIntervalMs: 0,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'run-completed' && ++completed === ids.length) allDone();
      },
    });
    await worker.start();
    await done;
    await worker.stop();

    for (const id of ids) expect((await runState(base, id)).run.status).toBe('completed');
    const claims = statements.filter((s) => /\bclaimed AS\b/.test(s));
    const fused = statements.filter((s) => /\bfused_claimed AS\b/.test(s));
    expect(claims).toHaveLength(1);
    // Every completion but those after the backlog ran dry carries a claim.
    expect(fused.length).toBeGreaterThanOrEqual(ids.length - 2);
    expect(events.filter((e) => e.type === 'run-claimed')).toHaveLength(ids.length);
    expect(events.filter((e) => e.type === 'error')).toEqual([]);
  });
});
