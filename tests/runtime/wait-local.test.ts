import { randomUUID } from 'node:crypto';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import {
  bindHandlers,
  createClient,
  createWorker,
  NonRetryableError,
  type SettledRun,
  type Store,
  type Worker,
} from 'ledgerflow/runtime';
import { RUN_SETTLED_CHANNEL } from '../../runtime/store/channels.js';
import { describeStores } from '../support/describe-stores.js';
import { recordingStore } from '../support/recording-store.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { waitUntil } from './fixtures/run-helpers.js';

/**
 * A wait answered in-process (issue 27 item 2): a run that the client's own worker
 * (`createClient({ store, worker })`) completes or fails resolves its wait from what the settling
 * commit wrote — no re-read, no statement of the wait's own — and that answer is, to the key
 * order, what a wait answered from the database returns. Polls and timeouts are ten minutes: a
 * wait that returns here was answered by the worker or woken by a notification.
 */
const NO_POLL = { timeoutMs: 600_000, pollMs: 600_000, recheckMs: 600_000 } as const;
const WORKER_QUIET = { pollIntervalMs: 600_000, reconcileIntervalMs: 0, scheduleIntervalMs: 0 } as const;

/** Outputs whose keys are not in jsonb's order (shorter first, then bytewise), nested, with -0 and a Date. */
const shaped = workflow('wt-lw-shaped', { version: 1, input: z.object({ n: z.number() }) })
  .step('zeta', {
    output: z.object({
      zulu: z.number(),
      b: z.object({ yy: z.array(z.number()), x: z.string() }),
      minusZero: z.number(),
    }),
  })
  .step('a', { output: z.object({ when: z.string(), longer: z.boolean(), s: z.null() }) });

const failing = workflow('wt-lw-failing', { version: 1, input: z.object({ why: z.string() }) }).step('refuse', {
  output: z.object({ never: z.boolean() }),
  retry: { maxAttempts: 1 },
});

/** `gate`: the first step waits for it (resolved: runs at once). */
const shapedHandlers = (gate: Promise<void> = Promise.resolve()) =>
  bindHandlers(
    shaped,
    {
      zeta: async ({ input }) => (await gate, { zulu: input.n, b: { yy: [3, 1, 2], x: 'é\u{1F600}' }, minusZero: -0 }),
      a: () => ({ when: new Date(0).toISOString(), longer: true, s: null }),
    },
    shapeHash(shaped),
  );

/** Fails its first attempt (a plain error: retried after a short backoff), then succeeds. */
const retried = workflow('wt-lw-retried', { version: 1, input: z.object({ label: z.string() }) }).step('once', {
  output: z.object({ attempt: z.number() }),
  retry: { maxAttempts: 3, initialDelayMs: 20, maxDelayMs: 20, backoffFactor: 1, jitter: 0 },
});

const retriedHandlers = () =>
  bindHandlers(
    retried,
    {
      once: ({ attempt }) => {
        if (attempt === 1) throw new Error('first attempt fails');
        return { attempt };
      },
    },
    shapeHash(retried),
  );

class RefusedError extends NonRetryableError {
  override readonly name = 'RefusedError';
}

const failingHandlers = () =>
  bindHandlers(
    failing,
    {
      refuse: ({ input }) => {
        throw new RefusedError(`refused: ${input.why}`);
      },
    },
    shapeHash(failing),
  );

const recorded = recordingStore;

const isStartInsert = (s: string): boolean => /INSERT INTO ledgerflow\.workflow_run/.test(s);
// A fenced commit: its `fenced` CTE (a result commit's comes after its `input` rows).
const isStepCommit = (s: string): boolean => /\bfenced AS \(/.test(s);

describeStores('a wait answered by the worker of its process', (getStore) => {
  const workers: Worker[] = [];
  beforeAll(() => migrateForTest(getStore(), [shaped, failing, retried]));
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });

  const isMarked = async (runId: string): Promise<boolean> => {
    const row = await getStore()
      .db.selectFrom('ledgerflow.workflow_run')
      .select('notify_settled')
      .where('id', '=', runId)
      .executeTakeFirst();
    return row?.notify_settled === true;
  };

  const localClient = async (store: Store, gate?: Promise<void>) => {
    const worker = createWorker({
      store,
      workflows: [shapedHandlers(gate), failingHandlers()],
      concurrency: 2,
      ...WORKER_QUIET,
    });
    workers.push(worker);
    await worker.start();
    return createClient({ store, worker });
  };

  it('startAndWait costs the start and the step commits, and nothing for the wait: no notification awaited, no re-read', async () => {
    const { store, statements } = recorded(getStore());
    const client = await localClient(store);
    // The first start reads the limits and the migrated version (cached from then on).
    await client.startAndWait(shaped, { n: 0 }, { wait: NO_POLL });

    const before = statements.length;
    const run = await client.startAndWait(shaped, { n: 1 }, { wait: NO_POLL });
    const during = statements.slice(before);

    expect(run.status).toBe('completed');
    // One statement: the start's insert is the run's completion (its two plain steps: the first
    // carried; client/insert-run.ts `completion`) — and not one statement more: no BEGIN or
    // COMMIT, no status read, no read of the run's records.
    expect(during.map((s) => (isStartInsert(s) ? 'insert' : isStepCommit(s) ? 'step commit' : s))).toEqual(['insert']);
  });

  it('start, then waitForRun of a run its flight drives: the wait marks nothing and reads nothing', async () => {
    const { store, statements } = recorded(getStore());
    let release!: () => void;
    const client = await localClient(store, new Promise<void>((resolve) => (release = resolve)));
    await client.startAndWait(failing, { why: 'warm-up' }, { wait: NO_POLL });
    const started = await client.start(shaped, { n: 5 });
    const before = statements.length;
    const waiting = client.waitForRun(started.runId, NO_POLL);
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    const run = await waiting;
    expect(run).toMatchObject({ id: started.runId, status: 'completed', error: null });
    // Only the run's own step commit: no mark (an UPDATE and its commit), no status read.
    expect(statements.slice(before).map((s) => (isStepCommit(s) ? 'step commit' : s))).toEqual(['step commit']);
    expect(await isMarked(run.id)).toBe(false);
  });

  it('start, then waitForRun of a run its flight leaves unsettled: the wait marks it then and is answered from the database', async () => {
    const store = getStore();
    let release!: () => void;
    const client = await localClient(store, new Promise<void>((resolve) => (release = resolve)));
    const started = await client.start(shaped, { n: 6 });
    const waiting = client.waitForRun(started.runId, NO_POLL);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await createClient({ store }).cancel(started.runId)).toBe(true);
    release();
    expect(await waiting).toMatchObject({ id: started.runId, status: 'cancelled', output: null, error: null });
  });

  it('answers in-process exactly what a wait answered from the database returns: output key order, error shape', async () => {
    const store = getStore();
    const client = await localClient(store);
    // Without the worker: its waits are answered from the database (mark, notification, one read).
    const remote = createClient({ store });

    const completed = await client.startAndWait(shaped, { n: 7 }, { wait: NO_POLL });
    const completedReread = await remote.waitForRun(completed.id, NO_POLL);
    expect(JSON.stringify(completed)).toBe(JSON.stringify(completedReread));
    expect(Object.keys(completed.output as object)).toEqual(['a', 'zeta']);
    expect(completed).toEqual<SettledRun>({
      id: completed.id,
      workflow_name: 'wt-lw-shaped',
      workflow_version: 1,
      status: 'completed',
      output: {
        a: { s: null, when: '1970-01-01T00:00:00.000Z', longer: true },
        zeta: { b: { x: 'é\u{1F600}', yy: [3, 1, 2] }, zulu: 7, minusZero: 0 },
      },
      error: null,
    });

    const failed = await client.startAndWait(failing, { why: 'no' }, { wait: NO_POLL });
    const failedReread = await remote.waitForRun(failed.id, NO_POLL);
    expect(failed.status).toBe('failed');
    expect(failed.output).toBeNull();
    expect(JSON.stringify(failed)).toBe(JSON.stringify(failedReread));
    expect(failed.error).toMatchObject({ name: 'RefusedError', message: 'refused: no', step: 'refuse', attempt: 1 });
  });

  it('a run claimed and settled by the worker of its process sends no notification', async () => {
    const store = getStore();
    const client = await localClient(store);
    const notified: string[] = [];
    const unlisten = await store.listen(RUN_SETTLED_CHANNEL, (payload) => notified.push(payload));
    try {
      const run = await client.startAndWait(shaped, { n: 11 }, { wait: NO_POLL });
      expect(run.status).toBe('completed');
      expect(await isMarked(run.id)).toBe(false);
      // A marked run settled after it: its notification arrives, and none came before it for ours.
      const marker = await createClient({ store }).startAndWait(shaped, { n: 12 }, { wait: NO_POLL });
      await waitUntil('the marked run notified', () => notified.includes(marker.id), 5_000);
      expect(notified).not.toContain(run.id);
    } finally {
      await unlisten();
    }
  });

  it('a cancel from another client of a run its flight is driving ends the wait once that flight is fenced out', async () => {
    const store = getStore();
    let release!: () => void;
    const client = await localClient(store, new Promise<void>((resolve) => (release = resolve)));
    const runId = randomUUID();
    const waiting = client.startAndWait(shaped, { n: 13 }, { runId, wait: NO_POLL });
    await waitUntil(
      'the run started',
      async () =>
        (await store.db
          .selectFrom('ledgerflow.workflow_run')
          .select('id')
          .where('id', '=', runId)
          .executeTakeFirst()) !== undefined,
    );
    expect(await createClient({ store }).cancel(runId)).toBe(true);
    release();
    expect(await waiting).toMatchObject({ id: runId, status: 'cancelled', output: null, error: null });
  });

  it('a run its flight leaves unsettled (a retry after a backoff) is answered once it settles', async () => {
    const store = getStore();
    const worker = createWorker({
      store,
      workflows: [retriedHandlers()],
      concurrency: 2,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      scheduleIntervalMs: 0,
    });
    workers.push(worker);
    await worker.start();
    const client = createClient({ store, worker });
    const run = await client.startAndWait(retried, { label: 'r-1' }, { wait: NO_POLL });
    expect(run).toMatchObject({ status: 'completed', output: { once: { attempt: 2 } }, error: null });
  });

  it('a wait of another client, without the worker, is still woken by the settling commit', async () => {
    const store = getStore();
    let release!: () => void;
    const client = await localClient(store, new Promise<void>((resolve) => (release = resolve)));
    const elsewhere = createClient({ store });
    const notified: string[] = [];
    const unlisten = await store.listen(RUN_SETTLED_CHANNEL, (payload) => notified.push(payload));
    try {
      // Started and waited for here (its step held), and waited for by the other client too.
      const runId = randomUUID();
      const here = client.startAndWait(shaped, { n: 3 }, { runId, wait: NO_POLL });
      await waitUntil(
        'the run started',
        async () =>
          (await store.db
            .selectFrom('ledgerflow.workflow_run')
            .select('id')
            .where('id', '=', runId)
            .executeTakeFirst()) !== undefined,
      );
      const there = elsewhere.waitForRun(runId, NO_POLL);
      // The local start inserted it unmarked; the other wait marks it itself, so its settle notifies.
      await waitUntil('the other client marked the run', () => isMarked(runId), 5_000);
      release();
      const [a, b] = await Promise.all([here, there]);
      expect(a).toEqual(b);
      expect(b.status).toBe('completed');
      // The settling commit notified (the run is marked): what wakes the other client.
      await waitUntil('the notification seen by the test listener too', () => notified.includes(runId), 5_000);
    } finally {
      await unlisten();
    }
  });
});
