import { beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createClient, createWorker, MigrationError, type WorkerEvent } from 'ledgerflow/runtime';
import type { CliIo } from '../../runtime/cli/cli-io.js';
import { main } from '../../runtime/cli/main.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { gate } from './fixtures/test-handlers.js';
import { runState, startTestRun } from './fixtures/run-helpers.js';

/**
 * The upgrade path: v1 and v2 of a workflow declared side by side, one worker serving both, the
 * handlers of unchanged steps shared. A worker that would strand v1's unfinished runs refuses
 * to start unless told another worker serves them.
 */
// #region upgrade-declarations
const input = z.object({ orderId: z.string() });
// v1 stays declared, unchanged (in its own file, e.g. quote.v1.workflow.ts), while its runs finish.
const v1 = workflow('quote', { version: 1, input })
  .step('quote', { output: z.object({ cents: z.number().int() }) })
  .step('confirm', { output: z.object({ text: z.string() }) });
// v2 adds a step at the end and changes nothing before it.
const v2 = workflow('quote', { version: 2, input })
  .step('quote', { output: z.object({ cents: z.number().int() }) })
  .step('confirm', { output: z.object({ text: z.string() }) })
  .step('notify', { output: z.object({ sent: z.boolean() }) });
// #endregion upgrade-declarations

describeStores('upgrading a workflow: v1 and v2 side by side', (getStore) => {
  const held = gate();
  let holdV1 = true;
  // Handlers of the unchanged steps, written once and bound to both versions.
  const shared = {
    quote: () => ({ cents: 1200 }),
    confirm: async ({ steps }: { steps: { quote: { cents: number } } }) => {
      if (holdV1) await held.wait();
      return { text: `confirmed ${steps.quote.cents}` };
    },
  };
  const v1Registration = bindHandlers(v1, shared, shapeHash(v1));
  const v2Registration = bindHandlers(v2, { ...shared, notify: () => ({ sent: true }) }, shapeHash(v2));

  beforeAll(() => migrateForTest(getStore(), [v1, v2]).then(() => undefined));

  it('a v1 run in flight completes on a worker serving both, while v2 runs start and complete', async () => {
    const store = getStore();
    const old = await startTestRun(store, v1, { orderId: 'up-1' });
    const first = createWorker({ store, workflows: [v1Registration], pollIntervalMs: 20, reconcileIntervalMs: 0 });
    await first.start();
    await held.entered; // v1 is mid-way: its first step is done, the second in flight
    await first.stop({ timeoutMs: 10 });
    holdV1 = false;
    held.open();

    // Deploy: v2 is now what `start` by name uses; a worker serving only v2 would strand v1's run.
    const client = createClient({ store, workflows: [v1, v2] });
    const { runId: fresh } = await client.start('quote', { orderId: 'up-2' });
    const refusing = createWorker({ store, workflows: [v2Registration], pollIntervalMs: 20, reconcileIntervalMs: 0 });
    const refusal = await refusing.start().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(MigrationError);
    expect((refusal as Error).message).toContain('it has no handlers for quote v1 (1 unfinished: 1 pending)');
    expect((refusal as Error).message).toContain('--allow-missing-versions');

    const both = createWorker({
      store,
      workflows: [v1Registration, v2Registration],
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    await both.drain();
    await both.stop();
    expect((await runState(store, old)).run).toMatchObject({
      status: 'completed',
      workflow_version: 1,
      output: { quote: { cents: 1200 }, confirm: { text: 'confirmed 1200' } },
    });
    expect((await runState(store, fresh)).run).toMatchObject({ status: 'completed', workflow_version: 2 });
    expect((await runState(store, fresh)).run.output).toMatchObject({ notify: { sent: true } });
  });

  it('allowMissingVersions starts anyway (a rolling deploy) and says which versions it leaves to others', async () => {
    const store = getStore();
    await startTestRun(store, v1, { orderId: 'up-3' });
    const events: WorkerEvent[] = [];
    const w = createWorker({
      store,
      workflows: [v2Registration],
      allowMissingVersions: true,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      onEvent: (e) => events.push(e),
    });
    await w.start();
    await w.stop();
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'versions-unserved', versions: ['quote v1 (1 unfinished: 1 pending)'] }),
    );
  });

  it('`ledgerflow versions` lists each version with its unfinished runs', async () => {
    const store = getStore();
    const versions = await createClient({ store }).listVersions();
    expect(
      versions.filter((v) => v.workflowName === 'quote').map((v) => [v.version, v.unfinished, v.completed]),
    ).toEqual([
      [1, 1, 1],
      [2, 0, 1],
    ]);
    if (store.url === undefined) return; // the CLI opens PostgreSQL by URL; PGlite here is in memory
    const out: string[] = [];
    const io: CliIo = { out: (t) => void out.push(t), err: (t) => void out.push(t) };
    expect(await main(['versions', '--database-url', store.url], io)).toBe(0);
    const lines = out.join('').split('\n');
    expect(lines[0]).toMatch(
      /^WORKFLOW +VERSION +UNFINISHED +PENDING +RUNNING +WAITING +PARKED +COMPLETED +FAILED +CANCELLED +MIGRATED$/,
    );
    expect(lines.find((l) => l.startsWith('quote ') && / 1 +1 +1 +0 +0 +0 +1 +0 +0 /.test(l))).toBeDefined();
  });
});
