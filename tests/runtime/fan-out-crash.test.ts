import { afterEach, beforeAll, expect, it } from 'vitest';
import { sql } from 'kysely';
import { createClient, createWorker } from 'ledgerflow/runtime';
import { configureFaults } from 'ledgerflow/testing';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { fanOut, WAIT_WORKFLOWS, waitHandlers } from './fixtures/wait-workflows.js';

/**
 * A fan-out whose attempts keep failing between the commits that start its children: every
 * attempt dies right after a batch (fault point `after-child-batch`), and the next one
 * recomputes the list and goes on from what the database says. No child is started twice,
 * none is missing, and the outputs are in item order. (The chaos run does the same with
 * SIGKILL; this is the deterministic version, on both stores.)
 */
describeStores('fan-out interrupted between batches', (getStore) => {
  beforeAll(() => migrateForTest(getStore(), WAIT_WORKFLOWS));
  afterEach(() => configureFaults(undefined));

  it('starts every child exactly once though attempts fail after committed batches', async () => {
    const client = createClient({ store: getStore() });
    // 20 items, at most 3 per commit (and 3 unfinished at once): the first 2 attempts each die after a batch.
    configureFaults({ seed: 11, points: { 'after-child-batch': { probability: 1, actions: ['throw'], times: 2 } } });
    const { runId } = await client.start(fanOut, { id: 'crash-1', count: 20, failAt: -1 });
    const worker = createWorker({
      store: getStore(),
      workflows: waitHandlers(),
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      childrenPerCommit: 3,
    });
    try {
      await worker.drain({ timeoutMs: 60_000 });
    } finally {
      await worker.stop();
    }
    const run = await client.getRun(runId);
    expect(run.status).toBe('completed');
    const failed = run.attempts.filter((a) => a.step_name === 'double' && a.status === 'failed');
    expect(failed.map((a) => (a.error as { name: string }).name)).toEqual(Array(2).fill('InjectedFaultError'));
    const { rows } = await sql<{ parent_index: number; n: number }>`
      SELECT parent_index, count(*)::int AS n FROM ledgerflow.workflow_run
       WHERE parent_run_id = ${runId} GROUP BY parent_index ORDER BY parent_index`.execute(getStore().db);
    expect(rows).toEqual(Array.from({ length: 20 }, (_, i) => ({ parent_index: i, n: 1 })));
    expect((run.output as { double: Array<{ value: number }> }).double.map((r) => r.value)).toEqual(
      Array.from({ length: 20 }, (_, i) => 2 * (i + 1)),
    );
  });
});
