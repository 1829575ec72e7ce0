import { sql } from 'kysely';
import pg from 'pg';
import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker, type Store, type Worker, type WorkerEvent } from 'ledgerflow/runtime';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { appRows, eventLog, runState, setupAppSchema, startTestRun } from './fixtures/run-helpers.js';
import type { AppDatabase } from './fixtures/test-workflows.js';

/**
 * A transactional step's transaction on a pipelining store (DESIGN.md "Pipelined on PostgreSQL"):
 * BEGIN, the start's insert and the ledger row's opening go out together, and so do the fenced
 * advance and COMMIT. COMMIT is on the wire before the advance is answered, so an advance that is
 * not fenced must fail — aborting the transaction, so that COMMIT rolls it back — rather than
 * answer `fenced = false` after the COMMIT behind it has already been sent.
 */
const input = z.object({ orderId: z.string() });
const fast = { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 20, backoffFactor: 1, jitter: 0 } as const;

const fencedOut = workflow('wt-pipeline-fence', { version: 1, input }).transactional('write', {
  output: z.object({ rowId: z.number() }),
  key: ({ input }) => `pipeline-write:${input.orderId}`,
  retry: fast,
});

/** `write` inserts its row; on its first attempt it then moves its own run's fencing token on, inside its transaction. */
function handlers() {
  return bindHandlers<typeof fencedOut, AppDatabase>(
    fencedOut,
    {
      write: async ({ tx, runId, input, attempt, record }) => {
        const row = await tx
          .insertInto('wt_app.reservation')
          .values({ run_id: runId, order_id: input.orderId, quantity: 1, written_by: `attempt ${attempt}` })
          .returning('id')
          .executeTakeFirstOrThrow();
        // A take-over as this transaction sees it: the commit's fence now fails.
        if (attempt === 1)
          await sql`UPDATE ledgerflow.workflow_run SET fencing_token = fencing_token + 1 WHERE id = ${runId}`.execute(
            tx,
          );
        return record({ rowId: row.id });
      },
    },
    shapeHash(fencedOut),
  );
}

/** A worker of `fencedOut` whose lease runs out in half a second: attempt 1's run is taken over soon after it is fenced out. */
function fencedOutWorker(store: Store, onEvent: (event: WorkerEvent) => void): Worker {
  return createWorker({
    store,
    workflows: [handlers()],
    leaseMs: 500,
    heartbeatMs: 100,
    pollIntervalMs: 50,
    reconcileIntervalMs: 0,
    scheduleIntervalMs: 0,
    onEvent,
  });
}

describeStores('a transactional step whose commit is not fenced', (getStore) => {
  const workers: Worker[] = [];
  beforeAll(async () => {
    await migrateForTest(getStore(), [fencedOut]);
    await setupAppSchema(getStore());
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 1_000 })));
  });

  it('commits nothing of its transaction — row, ledger row, token — and the retry after the lease writes once', async () => {
    const store = getStore();
    const log = eventLog();
    const w = fencedOutWorker(store, log.onEvent);
    workers.push(w);
    const runId = await startTestRun(store, fencedOut, { orderId: 'fence-1' });
    await w.start();
    await log.waitFor('run-completed', (e) => e.runId === runId);
    const { run, attempts, effects } = await runState(store, runId);
    expect(run.status).toBe('completed');
    // Attempt 1's row and its token change were rolled back with the failed commit; attempt 2 wrote once.
    expect((await appRows(store, runId)).map((r) => r.written_by)).toEqual(['attempt 2']);
    expect(attempts.map((a) => `${a.attempt}:${a.status}`)).toEqual(['1:abandoned', '2:succeeded']);
    expect(effects.map((e) => [e.attempt, e.status])).toEqual([[2, 'recorded']]);
    // The abandoned attempt lost its lease at the commit, named as such.
    expect(log.events.some((e) => e.type === 'lease-lost' && e.runId === runId)).toBe(true);
  });
});

describe('a transactional step’s statements on a pipelining store [pg]', () => {
  let base: TestStore;
  let store: Store;
  const sent: { text: string; unanswered: number; client: WatchingClient; at: number }[] = [];
  /** Every socket write of a watched connection, in order with the statements (`at` counts both). */
  const writes: { client: WatchingClient; at: number }[] = [];
  let events = 0;

  /**
   * Records every statement with how many statements of its connection were still unanswered
   * when it was sent, and how many times the connection had written to its socket by then.
   */
  class WatchingClient extends pg.Client {
    #unanswered = 0;
    constructor(config?: string | pg.ClientConfig) {
      super(config);
      const socket = (this as unknown as { connection: { stream: Socket } }).connection.stream;
      const [write, writev] = [socket._write, socket._writev];
      const count = () => writes.push({ client: this, at: events++ });
      socket._write = function countedWrite(this: Socket, ...args: Parameters<Socket['_write']>) {
        count();
        write.apply(this, args);
      };
      socket._writev = function countedWritev(this: Socket, ...args: Parameters<NonNullable<Socket['_writev']>>) {
        count();
        writev!.apply(this, args);
      };
    }
    override query(...args: unknown[]): never {
      const config = args[0] as string | { text: string };
      sent.push({
        text: typeof config === 'string' ? config : config.text,
        unanswered: this.#unanswered,
        client: this,
        at: events++,
      });
      this.#unanswered += 1;
      const answer = (super.query as (...a: unknown[]) => Promise<unknown>).apply(this, args);
      const settle = () => (this.#unanswered -= 1);
      void answer.then(settle, settle);
      return answer as never;
    }
  }

  beforeAll(async () => {
    base = await createPgTestStore();
    await migrateForTest(base, [fencedOut]);
    await setupAppSchema(base);
    store = createPgStore({ connectionString: base.url!, clientClass: WatchingClient, maxConnections: 4 });
  });
  afterAll(async () => {
    await store.close();
    await base.close();
  });

  it('sends BEGIN and the ledger row together, and the advance and COMMIT together, each pair in one socket write', async () => {
    expect(store.pipelines).toBe(true);
    const log = eventLog();
    const w = fencedOutWorker(store, log.onEvent);
    await w.start();
    // Attempt 1 is fenced out (see handlers), attempt 2 commits: both transactions pipelined.
    const runId = await startTestRun(store, fencedOut, { orderId: 'watch-1' });
    await log.waitFor('run-completed', (e) => e.runId === runId);
    await w.stop();

    const begins = sent.flatMap((s, i) => (/^BEGIN;/.test(s.text) ? [i] : []));
    expect(begins).toHaveLength(2);
    for (const begin of begins) {
      // The opening statement went out behind BEGIN, before BEGIN was answered.
      expect(sent[begin + 1]!.text).toMatch(/INSERT INTO ledgerflow\.step_effect/);
      expect(sent[begin + 1]!.unanswered).toBeGreaterThanOrEqual(1);
      expectOneWrite(begin, begin + 1);
    }
    const commits = sent.flatMap((s, i) => (s.text === 'COMMIT' ? [i] : []));
    // Both attempts sent COMMIT right behind their advance (the first one's rolled back).
    expect(commits).toHaveLength(2);
    for (const commit of commits) {
      expect(sent[commit - 1]!.text).toMatch(/AS unfenced/);
      expect(sent[commit]!.unanswered).toBeGreaterThanOrEqual(1);
      expectOneWrite(commit - 1, commit);
    }
    expect((await appRows(base, runId)).map((r) => r.written_by)).toEqual(['attempt 2']);
  });

  /**
   * Statements `first..last` of `sent` (one connection's burst) left in one socket write: the
   * connection wrote nothing while they were handed to it, and once after, before its next statement.
   */
  function expectOneWrite(first: number, last: number): void {
    const burst = sent.slice(first, last + 1);
    const client = burst[0]!.client;
    expect(burst.every((s) => s.client === client)).toBe(true);
    const next = sent.slice(last + 1).find((s) => s.client === client)?.at ?? Number.POSITIVE_INFINITY;
    const mine = writes.filter((w) => w.client === client);
    expect(mine.filter((w) => w.at > burst[0]!.at && w.at < burst.at(-1)!.at)).toHaveLength(0);
    expect(mine.filter((w) => w.at > burst.at(-1)!.at && w.at < next)).toHaveLength(1);
  }
});
