import { sql, type KyselyPlugin } from 'kysely';
import pg from 'pg';
import { shapeHash } from 'ledgerflow/dsl';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  bindHandlers,
  createClient,
  createWorker,
  type Store,
  type Worker,
  type WorkerOptions,
} from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { storeWithClient } from '../support/store-with-client.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { eventLog, runState, waitUntil } from './fixtures/run-helpers.js';
import { poison } from './fixtures/poison-workflows.js';

/**
 * One slot accounting (issue 24, item 6): a run counts against the worker's concurrency from its
 * claim until its flight ends, whichever path claimed it, its lease is renewed from the claim on,
 * and no lease is launched twice. The window these tests open: a claim of the loop fails, the
 * next one takes a run, and the loop re-subscribes to LISTEN (held open here by a LISTEN that
 * waits for the test) — before the fix, the run it took was counted nowhere and renewed by
 * nobody until that LISTEN returned, and a local start, a fused claim or an orphan adoption
 * took its slot.
 */
const WINDOW: Partial<WorkerOptions> = {
  pollIntervalMs: 600_000,
  reconcileIntervalMs: 0,
  leaseMs: 3_000,
  heartbeatMs: 100,
};

const isLoopClaim = (s: string): boolean => /\bclaimed AS\b/.test(s) && /\bexpired AS\b/.test(s);
const isStartClaim = (s: string): boolean =>
  /\bclaimed AS\b/.test(s) && !/\bexpired AS\b/.test(s) && /r\.id = \$\d+::uuid/.test(s);

/**
 * The store with faults: `failNextLoopClaim()` and `failNextStartClaim()` make the next such
 * statement fail before it runs (as on a broken connection); every LISTEN after the first waits
 * until `releaseListen()`.
 */
/** How long a wait of these tests may take before it fails saying what it waited for (not a timing assertion). */
const WAIT_MS = 20_000;

function faulty(base: Store) {
  let failLoopClaim = false;
  let failStartClaim = false;
  let listens = 0;
  let releaseListen!: () => void;
  const listenHeld = new Promise<void>((resolve) => (releaseListen = resolve));
  const state = { relistening: false, relistened: false, loopClaimsDone: 0 };
  // Loop claims compiled and not yet answered: one compiled before a fault was armed may still
  // run after it (waiting for a connection — behind PgBouncer, for a server connection).
  const loopClaimsInFlight = new Set<unknown>();
  const plugin: KyselyPlugin = {
    transformQuery: ({ node, queryId }) => {
      const text = base.db.getExecutor().compileQuery(node, queryId).sql;
      if (failLoopClaim && isLoopClaim(text)) {
        failLoopClaim = false;
        throw new Error('Connection terminated unexpectedly (test: loop claim)');
      }
      if (isLoopClaim(text)) loopClaimsInFlight.add(queryId);
      if (failStartClaim && isStartClaim(text)) {
        failStartClaim = false;
        throw new Error('Connection terminated unexpectedly (test: start claim)');
      }
      return node;
    },
    transformResult: async ({ result, queryId }) => {
      if (loopClaimsInFlight.delete(queryId)) state.loopClaimsDone += 1;
      return result;
    },
  };
  const store: Store = {
    ...base,
    db: base.db.withPlugin(plugin),
    listen: async (channel, onNotify, onLost, options) => {
      listens += 1;
      if (listens === 1) return base.listen(channel, onNotify, onLost, options);
      state.relistening = true;
      await listenHeld;
      const unlisten = await base.listen(channel, onNotify, onLost, options);
      state.relistened = true;
      return unlisten;
    },
  };
  return {
    store,
    state,
    /** No loop claim is on its way, and the worker's start-up claim has answered. */
    claimsSettled: () => state.loopClaimsDone > 0 && loopClaimsInFlight.size === 0,
    failNextLoopClaim: () => (failLoopClaim = true),
    failNextStartClaim: () => (failStartClaim = true),
    releaseListen: () => releaseListen(),
  };
}

/** Handlers of `poison` that hold each run (by label) until `open(label)`, counting who runs at once. */
function heldHandlers() {
  const gates = new Map<string, { opened: Promise<void>; open: () => void }>();
  let allOpen = false;
  const gateOf = (label: string) => {
    let g = gates.get(label);
    if (g === undefined) {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      g = { opened, open };
      gates.set(label, g);
      if (allOpen) open();
    }
    return g;
  };
  const calls = new Map<string, number>();
  const counts = { running: 0, max: 0 };
  const registration = bindHandlers(
    poison,
    {
      explode: async ({ runId, input }) => {
        calls.set(runId, (calls.get(runId) ?? 0) + 1);
        counts.running += 1;
        counts.max = Math.max(counts.max, counts.running);
        try {
          await gateOf(input.label).opened;
        } finally {
          counts.running -= 1;
        }
        return { survivedBy: input.label };
      },
    },
    shapeHash(poison),
  );
  return {
    registration,
    calls,
    counts,
    open: (label: string) => gateOf(label).open(),
    openAll: () => {
      allOpen = true;
      for (const g of gates.values()) g.open();
    },
  };
}

describeStores('one slot accounting for every run a worker claims', (getStore) => {
  const workers: Worker[] = [];
  const cleanups: (() => void)[] = [];
  beforeAll(() => migrateForTest(getStore(), [poison]));
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) cleanup();
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
    await sql`UPDATE ledgerflow.workflow_run SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = now()
               WHERE status NOT IN ('completed', 'failed', 'cancelled')`.execute(getStore().db);
  });

  /**
   * A worker whose loop claim fails once, then takes the run `held` and re-subscribes: resolves
   * once that LISTEN is waiting (the window is open).
   */
  async function openWindow(concurrency: number, before: readonly string[] = []) {
    const f = faulty(getStore());
    const h = heldHandlers();
    const log = eventLog();
    const worker = createWorker({
      store: f.store,
      workflows: [h.registration],
      concurrency,
      ...WINDOW,
      onEvent: log.onEvent,
    });
    workers.push(worker);
    cleanups.push(() => {
      f.releaseListen();
      h.openAll();
    });
    await worker.start();
    const plain = createClient({ store: getStore() });
    const earlier: string[] = [];
    for (const label of before) {
      const { runId } = await plain.start(poison, { label });
      earlier.push(runId);
      await waitUntil(`${label} running`, () => h.calls.has(runId));
    }
    // The fault must meet the claim that finds `held`, not one already on its way.
    await waitUntil('no loop claim on its way', () => f.claimsSettled(), WAIT_MS);
    f.failNextLoopClaim();
    const { runId: held } = await plain.start(poison, { label: 'held' });
    await log.waitFor('error', (e) => e.where === 'claim', WAIT_MS);
    await waitUntil('the re-subscribe after the failed claim', () => f.state.relistening);
    const run = (await runState(getStore(), held)).run;
    expect(run).toMatchObject({ status: 'running', lease_owner: worker.id });
    return { f, h, log, worker, held, earlier, leaseAtClaim: run.lease_expires_at! };
  }

  /** Launches per lease (run id and fencing token; every launch emits `run-claimed`, an adoption too): each must be 1. */
  function launches(log: ReturnType<typeof eventLog>): number[] {
    const perLease = new Map<string, number>();
    for (const e of log.events) {
      if (e.type !== 'run-claimed') continue;
      const key = `${e.runId}:${e.fencingToken}`;
      perLease.set(key, (perLease.get(key) ?? 0) + 1);
    }
    return [...perLease.values()];
  }

  it('a run the loop took is renewed from its claim on, also while the loop re-subscribes', async () => {
    const { held, leaseAtClaim } = await openWindow(1);
    await waitUntil(
      'a renewal of the held run while the LISTEN waits',
      async () =>
        new Date((await runState(getStore(), held)).run.lease_expires_at!).getTime() > new Date(leaseAtClaim).getTime(),
      2_000,
    );
  });

  it('a local start in that window gets no slot: concurrency 1 runs one handler at a time', async () => {
    const { f, h, log, worker, held } = await openWindow(1);
    const local = createClient({ store: f.store, worker });
    const { runId: started } = await local.start(poison, { label: 'started' });
    f.releaseListen();
    await waitUntil('the held run running', () => h.calls.has(held));
    h.openAll();
    for (const id of [held, started]) await log.waitFor('run-completed', (e) => e.runId === id);
    expect(h.counts.max).toBe(1);
    expect(launches(log)).toEqual([1, 1]);
    expect([...h.calls.values()]).toEqual([1, 1]);
  });

  it('an orphan adoption in that window does not launch the held run a second time', async () => {
    const { f, h, log, worker, held } = await openWindow(1);
    const local = createClient({ store: f.store, worker });
    // Given a slot, this start's commit fails and the worker looks for runs it holds that no flight drives.
    f.failNextStartClaim();
    const start = await local.start(poison, { label: 'started' }).then(
      ({ runId }) => runId,
      () => undefined,
    );
    await waitUntil('the held run running', () => h.calls.has(held));
    f.releaseListen();
    await waitUntil('the LISTEN back', () => f.state.relistened);
    await new Promise((resolve) => setTimeout(resolve, 50));
    h.openAll();
    await log.waitFor('run-completed', (e) => e.runId === held, WAIT_MS);
    if (start !== undefined) await log.waitFor('run-completed', (e) => e.runId === start, WAIT_MS);
    expect(h.calls.get(held)).toBe(1);
    expect(launches(log).every((n) => n === 1)).toBe(true);
    expect(h.counts.max).toBe(1);
  });

  it('a fused claim in that window claims only for the slot its run frees: concurrency 2 runs two handlers at a time', async () => {
    const { f, h, log, held, earlier } = await openWindow(2, ['first']);
    const plain = createClient({ store: getStore() });
    const later: string[] = [];
    for (const label of ['later-1', 'later-2']) later.push((await plain.start(poison, { label })).runId);
    // `first` completes; its completion commit claims for the slots it sees free.
    h.open('first');
    await log.waitFor('run-completed', (e) => e.runId === earlier[0]);
    await waitUntil('a later run running', () => later.some((id) => h.calls.has(id)));
    f.releaseListen();
    await waitUntil('the held run running', () => h.calls.has(held));
    h.openAll();
    for (const id of [held, ...later]) await log.waitFor('run-completed', (e) => e.runId === id);
    expect(h.counts.max).toBeLessThanOrEqual(2);
    expect(launches(log).every((n) => n === 1)).toBe(true);
  });
});

describe('the slots of a fused claim whose answer is lost [pg]', () => {
  let base: TestStore;
  let store: Store;
  let loseFusedAnswer = true;
  let loopClaimsSinceLoss = 0;

  beforeAll(async () => {
    base = await createPgTestStore();
    await migrateForTest(base, [poison]);
    /**
     * Runs the first statement that carries a fused claim, then reports the connection as lost;
     * holds the adoption's look-up until a loop claim ran after that, or 300 ms passed — the time
     * a claim taking the adoption's slots would need.
     */
    class LosesFusedAnswer extends pg.Client {
      override query(...args: unknown[]): never {
        const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text;
        const run = (): unknown => (pg.Client.prototype.query as (...a: unknown[]) => unknown).apply(this, args);
        if (typeof text === 'string' && !loseFusedAnswer && isLoopClaim(text)) loopClaimsSinceLoss += 1;
        if (
          typeof text === 'string' &&
          !loseFusedAnswer &&
          /^\s*SELECT id, fencing_token FROM ledgerflow\.workflow_run WHERE status = 'running' AND lease_owner/.test(
            text,
          )
        ) {
          return waitUntil('a loop claim', () => loopClaimsSinceLoss > 0, 300)
            .catch(() => undefined)
            .then(run) as never;
        }
        const result = run();
        if (
          loseFusedAnswer &&
          typeof text === 'string' &&
          text.includes('fused_claimed AS') &&
          result instanceof Promise
        ) {
          loseFusedAnswer = false;
          return result.then(() => {
            throw new Error('Connection terminated unexpectedly');
          }) as never;
        }
        return result as never;
      }
    }
    store = storeWithClient(base.url!, LosesFusedAnswer, 'answer-losing pool');
  });
  afterAll(async () => {
    await store.close();
    await base.close();
  });

  it('hold them until the adoption is over: concurrency 1 runs one handler at a time, the orphan included', async () => {
    const h = heldHandlers();
    h.open('first');
    const plain = createClient({ store: base });
    const ids: string[] = [];
    for (const label of ['first', 'orphan', 'next']) ids.push((await plain.start(poison, { label })).runId);
    const log = eventLog();
    const w = createWorker({
      store,
      workflows: [h.registration],
      concurrency: 1,
      pollIntervalMs: 20,
      leaseMs: 60_000,
      reconcileIntervalMs: 0,
      onEvent: log.onEvent,
    });
    await w.start();
    try {
      const adopted = await log.waitFor('run-adopted');
      expect(adopted.runId).toBe(ids[1]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      h.openAll();
      // (The first run's driver hears its lost answer as a lost lease: read the outcome from the database.)
      await waitUntil('every run to complete', async () => {
        const states = await Promise.all(ids.map((id) => runState(base, id)));
        return states.every((s) => s.run.status === 'completed') || undefined;
      });
    } finally {
      h.openAll();
      await w.stop({ timeoutMs: 200 });
    }
    expect(loseFusedAnswer).toBe(false);
    expect(h.counts.max).toBe(1);
    expect([...h.calls.values()]).toEqual([1, 1, 1]);
  });
});
