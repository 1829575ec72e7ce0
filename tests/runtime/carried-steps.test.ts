import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker, type Store, type WorkerEvent } from 'ledgerflow/runtime';
import { createTestEnvironment, type TestEnvironment } from 'ledgerflow/testing';
import { commitsIn, countingStore } from '../support/counting-store.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { runState, startTestRun } from './fixtures/run-helpers.js';

/**
 * Plain steps commit at effect boundaries (DESIGN.md "Commits at effect boundaries"): their
 * results ride on the run's next commit. What that must not change: attempt history, a crash
 * (the carried steps run again, nothing is lost or doubled), a failure after carried steps.
 */

const input = z.object({ orderId: z.string() });
const n = z.object({ n: z.number() });

const threePlain = workflow('wt-carry-three', { version: 1, input })
  .step('a', { output: n })
  .step('b', { output: n })
  .step('c', { output: n });

describe('carried plain steps: commits [pg]', () => {
  let base: TestStore;
  let store: Store;
  const logged: { sql: string; afterEvents: number }[] = [];
  const events: WorkerEvent[] = [];

  beforeAll(async () => {
    base = await createPgTestStore();
    await migrateForTest(base, [threePlain]);
    store = countingStore(base.url!, (text) => logged.push({ sql: text, afterEvents: events.length }));
  });
  afterAll(async () => {
    await store.close();
    await base.close();
  });

  it('settles a run of three plain steps with ONE commit after its claim, attempt history as if each step had committed', async () => {
    const registration = bindHandlers(
      threePlain,
      { a: () => ({ n: 1 }), b: ({ steps }) => ({ n: steps.a.n + 1 }), c: ({ steps }) => ({ n: steps.b.n + 1 }) },
      shapeHash(threePlain),
    );
    const runId = await startTestRun(base, threePlain, { orderId: 'three-1' });
    let completed!: () => void;
    const done = new Promise<void>((resolve) => (completed = resolve));
    const worker = createWorker({
      store,
      workflows: [registration],
      concurrency: 1,
      leaseMs: 60_000,
      pollIntervalMs: 60_000,
      reconcileIntervalMs: 0,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'run-completed') completed();
      },
    });
    await worker.start();
    await done;
    await worker.stop();

    const claimedAt = events.findIndex((e) => e.type === 'run-claimed');
    const completedAt = events.findIndex((e) => e.type === 'run-completed');
    const afterClaim = logged
      .filter((q) => q.afterEvents > claimedAt && q.afterEvents <= completedAt)
      .map((q) => q.sql);
    expect(commitsIn(afterClaim)).toBe(1);
    expect(afterClaim).toHaveLength(1);
    // The steps' events come once the commit that carried them is durable, in step order.
    expect(
      events
        .slice(claimedAt + 1, completedAt + 1)
        .map((e) => (e.type === 'step-succeeded' ? `${e.type} ${e.step}` : e.type)),
    ).toEqual(['step-succeeded a', 'step-succeeded b', 'step-succeeded c', 'run-completed']);

    const { run, results, attempts } = await runState(base, runId);
    expect(run.status).toBe('completed');
    expect(run.output).toEqual({ a: { n: 1 }, b: { n: 2 }, c: { n: 3 } });
    expect(results.map((r) => [r.step_name, r.output, r.attempt])).toEqual([
      ['a', { n: 1 }, 1],
      ['b', { n: 2 }, 1],
      ['c', { n: 3 }, 1],
    ]);
    expect(attempts.map((a) => [a.step_name, a.attempt, a.status])).toEqual([
      ['a', 1, 'succeeded'],
      ['b', 1, 'succeeded'],
      ['c', 1, 'succeeded'],
    ]);
    // Database times, in order: each attempt started after the one before it ended.
    const times = attempts.map((a) => [new Date(a.started_at).getTime(), new Date(a.finished_at!).getTime()] as const);
    for (const [i, [started, finished]] of times.entries()) {
      expect(finished).toBeGreaterThanOrEqual(started);
      if (i > 0) expect(started).toBeGreaterThanOrEqual(times[i - 1]![1]);
    }
  });
});

const carriedIntoEffect = workflow('wt-carry-crash', { version: 1, input })
  .step('a', { output: n })
  .step('b', { output: n })
  .transactional('t', { output: n, key: ({ input }) => `t:${input.orderId}` });

const failsAfterCarried = workflow('wt-carry-fail', { version: 1, input })
  .step('a', { output: n })
  .step('b', { output: n })
  .step('c', { output: n, retry: { maxAttempts: 3, initialDelayMs: 1_000, jitter: 0 } });

describe('carried plain steps: a crash and a failure mid-prefix', () => {
  let env: TestEnvironment;
  const ran = { a: 0, b: 0, t: 0, c: 0 };

  beforeAll(async () => {
    env = await createTestEnvironment({
      workflows: [
        bindHandlers(
          carriedIntoEffect,
          {
            a: () => ((ran.a += 1), { n: 1 }),
            b: () => ((ran.b += 1), { n: 2 }),
            t: async ({ tx, record }) => {
              ran.t += 1;
              // A statement through ctx.tx opens the step's transaction: the carried steps are its first write.
              const { rows } = await sql<{ v: number }>`SELECT 3 AS v`.execute(tx);
              return record({ n: rows[0]!.v });
            },
          },
          shapeHash(carriedIntoEffect),
        ),
        bindHandlers(
          failsAfterCarried,
          {
            a: () => ((ran.a += 1), { n: 1 }),
            b: () => ((ran.b += 1), { n: 2 }),
            c: () => {
              ran.c += 1;
              if (ran.c === 1) throw new Error('c is not ready yet');
              return { n: 3 };
            },
          },
          shapeHash(failsAfterCarried),
        ),
      ],
    });
  }, 60_000);
  afterAll(() => env?.close());
  beforeEach(async () => {
    await env.reset();
    Object.assign(ran, { a: 0, b: 0, t: 0, c: 0 });
  });

  it('a crash before the carrying commit loses the carried results: the next holder runs those steps again, and each result and effect is recorded once', async () => {
    const { runId: id } = await env.client.start(carriedIntoEffect, { orderId: 'crash-1' });
    env.crashAt('opening-step-transaction');
    expect((await env.runUntilIdle()).crashedAt).toBe('opening-step-transaction');
    // Nothing of the prefix reached the database: the run is still at its first step.
    const mid = await runState(env.store, id);
    expect(mid.run).toMatchObject({ status: 'running', current_step: 0 });
    expect(mid.results).toEqual([]);
    expect(ran).toMatchObject({ a: 1, b: 1, t: 1 });

    await env.advanceTime(env.leaseMs);
    await env.runUntilIdle();
    const { run, results, attempts, effects } = await runState(env.store, id);
    expect(run.status).toBe('completed');
    expect(ran).toMatchObject({ a: 2, b: 2, t: 2 });
    expect(results.map((r) => [r.step_name, r.output])).toEqual([
      ['a', { n: 1 }],
      ['b', { n: 2 }],
      ['t', { n: 3 }],
    ]);
    expect(effects.map((e) => [e.step_name, e.status])).toEqual([['t', 'recorded']]);
    // The crash is recorded on the attempt the database showed running: the first of the prefix.
    expect(
      attempts.map((a) => [a.step_name, a.attempt, a.status, (a.error as { name?: string } | null)?.name ?? null]),
    ).toEqual([
      ['a', 1, 'abandoned', 'LeaseExpired'],
      ['a', 2, 'succeeded', null],
      ['b', 1, 'succeeded', null],
      ['t', 1, 'succeeded', null],
    ]);
  });

  it('a plain step that fails after two carried steps records all three attempts: the carried ones succeeded, its own failed', async () => {
    const { runId: id } = await env.client.start(failsAfterCarried, { orderId: 'fail-1' });
    await env.runUntilIdle();
    const mid = await runState(env.store, id);
    expect(mid.run).toMatchObject({ status: 'pending', current_step: 2 });
    expect(mid.attempts.map((a) => [a.step_name, a.attempt, a.status])).toEqual([
      ['a', 1, 'succeeded'],
      ['b', 1, 'succeeded'],
      ['c', 1, 'failed'],
    ]);
    expect(mid.attempts[2]!.error).toMatchObject({ message: 'c is not ready yet' });

    await env.advanceTime(1_000);
    await env.runUntilIdle();
    const { run, results, attempts } = await runState(env.store, id);
    expect(run.status).toBe('completed');
    expect(ran).toMatchObject({ a: 1, b: 1, c: 2 });
    expect(results.map((r) => [r.step_name, r.output, r.attempt])).toEqual([
      ['a', { n: 1 }, 1],
      ['b', { n: 2 }, 1],
      ['c', { n: 3 }, 2],
    ]);
    expect(attempts.map((a) => [a.step_name, a.attempt, a.status])).toEqual([
      ['a', 1, 'succeeded'],
      ['b', 1, 'succeeded'],
      ['c', 1, 'failed'],
      ['c', 2, 'succeeded'],
    ]);
  });
});

const plainThenWrite = workflow('wt-carry-write', { version: 1, input })
  .step('a', { output: n })
  .transactional('write', { output: n, key: ({ input }) => `carry-write:${input.orderId}` });

/** The same, with a deadline that the plain step outlives (it sleeps past it when asked to). */
const lateWrite = workflow('wt-carry-late', { version: 1, input, timeoutMs: 300 })
  .step('a', { output: n })
  .transactional('write', { output: n, key: ({ input }) => `carry-late:${input.orderId}` });

describe('carried plain steps before a transactional step [pg]', () => {
  let base: TestStore;
  let store: Store;
  const logged: string[] = [];
  const writes: string[] = [];

  beforeAll(async () => {
    base = await createPgTestStore();
    await migrateForTest(base, [plainThenWrite, lateWrite]);
    await sql`CREATE TABLE wt_carry_app (run_id uuid PRIMARY KEY)`.execute(base.db);
    store = countingStore(base.url!, (text) => logged.push(text));
  });
  afterAll(async () => {
    await store.close();
    await base.close();
  });

  const drive = async (
    workflows: Parameters<typeof createWorker>[0]['workflows'],
    runId: string,
    until: WorkerEvent['type'],
  ) => {
    let done!: () => void;
    const ended = new Promise<void>((resolve) => (done = resolve));
    const worker = createWorker({
      store,
      workflows,
      concurrency: 1,
      leaseMs: 60_000,
      pollIntervalMs: 60_000,
      reconcileIntervalMs: 0,
      onEvent: (event) => {
        if (event.type === until && 'runId' in event && event.runId === runId) done();
      },
    });
    await worker.start();
    await ended;
    await worker.stop();
  };

  it('writes the carry and opens the ledger row in ONE statement, the first of the step transaction', async () => {
    const registration = bindHandlers(
      plainThenWrite,
      {
        a: () => ({ n: 1 }),
        write: async (ctx) => {
          await sql`INSERT INTO wt_carry_app VALUES (${ctx.runId}::uuid)`.execute(ctx.tx);
          writes.push(ctx.runId);
          return ctx.record({ n: ctx.steps.a.n + 1 });
        },
      },
      shapeHash(plainThenWrite),
    );
    const runId = await startTestRun(base, plainThenWrite, { orderId: 'w-1' });
    const before = logged.length;
    await drive([registration], runId, 'run-completed');
    const during = logged.slice(before);
    const carries = during.filter((q) => /\bcarried AS\b/.test(q));
    expect(carries).toHaveLength(1);
    expect(carries[0]).toMatch(/INSERT INTO ledgerflow\.step_effect/);
    const { run, results, attempts, effects } = await runState(base, runId);
    expect(run.status).toBe('completed');
    expect(results.map((r) => [r.step_name, r.output])).toEqual([
      ['a', { n: 1 }],
      ['write', { n: 2 }],
    ]);
    expect(attempts.map((a) => [a.step_name, a.attempt, a.status])).toEqual([
      ['a', 1, 'succeeded'],
      ['write', 1, 'succeeded'],
    ]);
    expect(effects.map((e) => [e.step_name, e.status, e.effect])).toEqual([['write', 'recorded', { n: 2 }]]);
    expect(writes.filter((w) => w === runId)).toHaveLength(1);
  });

  it('a deadline that passed while the carried step ran: the step transaction opens to find it, writes nothing, and the run is cancelled with the carry written', async () => {
    const registration = bindHandlers(
      lateWrite,
      {
        a: async () => (await new Promise((resolve) => setTimeout(resolve, 500)), { n: 1 }),
        write: async (ctx) => {
          await sql`INSERT INTO wt_carry_app VALUES (${ctx.runId}::uuid)`.execute(ctx.tx);
          writes.push(ctx.runId);
          return ctx.record({ n: 2 });
        },
      },
      shapeHash(lateWrite),
    );
    const runId = await startTestRun(base, lateWrite, { orderId: 'late-1' });
    await drive([registration], runId, 'run-deadline-exceeded');
    const { run, results, effects } = await runState(base, runId);
    expect(run.status).toBe('cancelled');
    expect(results.map((r) => [r.step_name, r.output])).toEqual([['a', { n: 1 }]]);
    expect(effects).toEqual([]);
    expect(writes).not.toContain(runId);
    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM wt_carry_app WHERE run_id = ${runId}::uuid`.execute(base.db);
    expect(rows[0]!.n).toBe(0);
  });
});
