import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createClient, createWorker, type WorkerEvent } from 'ledgerflow/runtime';
import { createPgStore, type PgStoreOptions } from '../../runtime/store/pg/pg-store.js';
import type { Store } from '../../runtime/store/store.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { setupAppSchema } from '../runtime/fixtures/run-helpers.js';
import { reserveHandlers, twoStepsHandlers } from '../runtime/fixtures/test-handlers.js';
import { ALL_TEST_WORKFLOWS, reserve, twoSteps } from '../runtime/fixtures/test-workflows.js';

/**
 * What running behind PgBouncer in transaction pooling mode takes (the `pgbouncer` project:
 * global-setup.ts starts it, `createPgTestStore` puts its stores behind it), beyond the store
 * conformance suite, which the same project runs through it.
 */

/** The URL of `database` through PgBouncer. */
function throughPgBouncer(database: string): string {
  const bouncer = inject('pgbouncerUrl');
  if (bouncer === undefined) throw new Error('these tests run in the pgbouncer project (npm run test:pgbouncer)');
  const url = new URL(bouncer);
  url.pathname = `/${database}`;
  return url.toString();
}

const databaseOf = (store: TestStore): string => new URL(store.url!).pathname.slice(1);

/** Rows of PgBouncer's admin console (`SHOW CLIENTS`, `SHOW STATS`). */
async function adminConsole<T>(command: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: throughPgBouncer('pgbouncer') });
  await client.connect();
  try {
    return (await client.query(command)).rows as T[];
  } finally {
    await client.end();
  }
}

/** `reserve` runs (a transactional step: BEGIN, SET LOCAL, the ledger row, the app row, the commit) driven by one worker of `concurrency`. */
async function reserveLoad(store: Store, runs: number, tag: string): Promise<{ statuses: string[]; errors: string[] }> {
  const errors: string[] = [];
  const worker = createWorker({
    store,
    workflows: [reserveHandlers()],
    concurrency: 8,
    pollIntervalMs: 50,
    leaseMs: 5_000,
    reconcileIntervalMs: 0,
    onEvent: (event: WorkerEvent) => {
      if (event.type === 'error') errors.push(`${event.where}: ${event.error.message}`);
    },
  });
  const client = createClient({ store });
  const ids: string[] = [];
  for (let i = 0; i < runs; i++) ids.push((await client.start(reserve, { orderId: `${tag}-${i}`, quantity: 1 })).runId);
  await worker.start();
  try {
    const settled = await Promise.all(
      ids.map((id) =>
        client
          .waitForRun(id, { timeoutMs: 10_000 })
          .catch((error: Error) => ({ status: `not settled: ${error.message}` })),
      ),
    );
    return { statuses: settled.map((run) => run.status), errors };
  } finally {
    await worker.stop({ timeoutMs: 5_000 });
  }
}

describe('behind PgBouncer in transaction pooling mode', () => {
  let base: TestStore;
  const extra: Store[] = [];
  const pooledStore = (options: Partial<PgStoreOptions> = {}): Store => {
    const store = createPgStore({
      connectionString: throughPgBouncer(databaseOf(base)),
      maxConnections: 10,
      pooler: { mode: 'transaction' },
      ...options,
    });
    extra.push(store);
    return store;
  };
  beforeAll(async () => {
    base = await createPgTestStore();
    await migrateForTest(base, ALL_TEST_WORKFLOWS);
    await setupAppSchema(base);
  });
  afterAll(async () => {
    await Promise.all(extra.map((store) => store.close()));
    await base.close();
  });

  it('the test stores reach PostgreSQL through PgBouncer, their many connections sharing a few server connections', async () => {
    expect(base.location).toMatch(/through a transaction pooler$/);
    await Promise.all(Array.from({ length: 10 }, () => sql`SELECT pg_sleep(0.05)`.execute(base.db)));
    const database = databaseOf(base);
    const clients = (await adminConsole<{ database: string }>('SHOW CLIENTS')).filter(
      (row) => row.database === database,
    );
    const servers = (await adminConsole<{ database: string }>('SHOW SERVERS')).filter(
      (row) => row.database === database,
    );
    expect(clients.length).toBeGreaterThan(4);
    expect(servers.length).toBeLessThanOrEqual(4);
  });

  it('runs a concurrent worker load with its stores as they are (createPgTestStore): every run completes, no error', async () => {
    // LEDGERFLOW_TEST_PGBOUNCER_PREPARED=1 gives the test stores preparedStatements: true: this then fails.
    const { statuses, errors } = await reserveLoad(base, 40, 'as-is');
    expect(errors).toEqual([]);
    expect(statuses.every((status) => status === 'completed')).toBe(true);
  });

  it('would not, with named prepared statements: each server connection knows only the statements parsed on it', async () => {
    // Whether a statement meets a server connection that never parsed it depends on how PgBouncer
    // hands them out under this load: seen 0 times in one load of 40 runs on a loaded machine, so
    // up to three loads, each with runs of its own; one that hits shows the failure.
    const rounds: string[][] = [];
    for (let round = 0; round < 3; round++) {
      const { statuses, errors } = await reserveLoad(
        pooledStore({ preparedStatements: true }),
        40,
        `prepared-${round}`,
      );
      // Every run still ends (the failed statements are retried as attempts), but not cleanly.
      expect(statuses.length).toBe(40);
      rounds.push(errors);
      if (errors.some((error) => /prepared statement "lf_[0-9a-f]+" (already exists|does not exist)/.test(error)))
        break;
    }
    const lost = rounds
      .flat()
      .filter((error) => /prepared statement "lf_[0-9a-f]+" (already exists|does not exist)/.test(error));
    expect(lost.length, `errors: ${rounds.flat().join('\n')}`).toBeGreaterThan(0);
  });

  describe('with no URL to listen on', () => {
    it('does not LISTEN, says why, and its worker and waits poll: runs complete and waitForRun returns', async () => {
      const store = pooledStore();
      expect(store.listenUnavailable).toMatch(/no pooler\.listenUrl/);
      await expect(store.listen('ledgerflow_runs', () => {})).rejects.toThrow(
        /cannot LISTEN on "ledgerflow_runs": .*poll instead/,
      );
      const events: WorkerEvent[] = [];
      const worker = createWorker({
        store,
        workflows: [twoStepsHandlers()],
        // A poll far longer than a run: a run done within it was not found by the poll alone
        // only if the start's claim took it (a worker-local start), which this client does not do.
        pollIntervalMs: 200,
        leaseMs: 5_000,
        reconcileIntervalMs: 0,
        onEvent: (event) => events.push(event),
      });
      await worker.start();
      try {
        const client = createClient({ store });
        const runs = await Promise.all(
          Array.from({ length: 5 }, (_, n) => client.startAndWait(twoSteps, { n }, { wait: { timeoutMs: 20_000 } })),
        );
        expect(runs.map((run) => run.status)).toEqual(Array(5).fill('completed'));
      } finally {
        await worker.stop();
      }
      expect(events.filter((event) => event.type === 'error')).toEqual([]);
      expect(events.filter((event) => event.type === 'listener-lost' || event.type === 'listener-restored')).toEqual(
        [],
      );
    });
  });

  it('with a listenUrl, LISTENs there: a NOTIFY sent through PgBouncer arrives', async () => {
    const store = pooledStore({ pooler: { mode: 'transaction', listenUrl: base.url! } });
    expect(store.listenUnavailable).toBeUndefined();
    const heard: string[] = [];
    const unlisten = await store.listen('lf_pgbouncer_probe', (payload) => heard.push(payload));
    try {
      await sql`SELECT pg_notify('lf_pgbouncer_probe', 'hello')`.execute(store.db);
      for (let i = 0; i < 100 && heard.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(heard).toEqual(['hello']);
    } finally {
      await unlisten();
    }
  });
});
