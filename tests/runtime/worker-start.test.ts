import type { KyselyPlugin } from 'kysely';
import { shapeHash } from 'ledgerflow/dsl';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { bindHandlers, createClient, createWorker, type Store, type Worker } from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { eventLog, runState } from './fixtures/run-helpers.js';
import { doubler } from './fixtures/wait-workflows.js';

/*
 * `worker.start()` reads and registers what the worker serves. A session the database ends under
 * it meanwhile (a restart, pg_terminate_backend, too many connections) must not fail the start:
 * it is reported and tried again. A database that cannot be reached at all fails it at once.
 */

/** The store whose next `n` statements fail before they run with `error()`. */
function failing(base: Store, n: number, error: () => Error): { store: Store; failed: () => number } {
  let left = n;
  let failed = 0;
  const plugin: KyselyPlugin = {
    transformQuery: ({ node }) => {
      if (left > 0) {
        left -= 1;
        failed += 1;
        throw error();
      }
      return node;
    },
    transformResult: async ({ result }) => result,
  };
  return { store: { ...base, db: base.db.withPlugin(plugin) }, failed: () => failed };
}

const terminated = (): Error =>
  Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });

describeStores('worker start', (getStore) => {
  const workers: Worker[] = [];
  beforeAll(() => migrateForTest(getStore(), [doubler]).then(() => undefined));
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
  });
  const handlers = () =>
    bindHandlers(doubler, { double: async ({ input }) => ({ value: input.n * 2 }) }, shapeHash(doubler));

  it('goes on through sessions the database ends while it starts: reported, tried again, then it runs', async () => {
    const f = failing(getStore(), 2, terminated);
    const log = eventLog();
    const worker = createWorker({
      store: f.store,
      workflows: [handlers()],
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      onEvent: log.onEvent,
    });
    workers.push(worker);
    await worker.start();
    expect(f.failed()).toBe(2);
    expect(log.events.filter((e) => e.type === 'error').map((e) => (e as { where: string }).where)).toEqual([
      'start',
      'start',
    ]);
    expect(log.events.some((e) => e.type === 'worker-started')).toBe(true);

    const { runId } = await createClient({ store: getStore() }).start(doubler, { n: 21 });
    await worker.drain();
    expect((await runState(getStore(), runId)).run).toMatchObject({ status: 'completed' });
  });

  it('fails at once when the database cannot be reached at all', async () => {
    const f = failing(getStore(), 1_000, refused);
    const worker = createWorker({ store: f.store, workflows: [handlers()], reconcileIntervalMs: 0 });
    await expect(worker.start()).rejects.toThrow(/ECONNREFUSED/);
    expect(f.failed()).toBe(1);
  });
});
