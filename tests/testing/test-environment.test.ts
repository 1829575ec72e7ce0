import { sql } from 'kysely';
import { createTestEnvironment, type TestEnvironment } from 'ledgerflow/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  awaitSettled,
  charge,
  deadlined,
  FakeProvider,
  flaky,
  kitRegistrations,
  napper,
  settled,
} from './kit-workflows.js';

/**
 * The testing kit on itself: one embedded environment for the file, reset between tests. Each
 * time jump is hours or a day: a test that passed by waiting would time out, so finishing at all
 * proves the clock moved; the wall time is logged for the report.
 */
const HOUR = 3_600_000;
let env: TestEnvironment;
let provider: FakeProvider;
const flakyFailures = { remaining: 0 };

beforeAll(async () => {
  provider = new FakeProvider();
  env = await createTestEnvironment({
    workflows: kitRegistrations(() => provider, flakyFailures),
    migrations: [[{ name: '0001_app.sql', sql: 'CREATE SCHEMA app; CREATE TABLE app.note (id text PRIMARY KEY);' }]],
    resetSchemas: ['app'],
  });
}, 60_000);
afterAll(() => env?.close());
beforeEach(async () => {
  await env.reset();
  provider = new FakeProvider();
  flakyFailures.remaining = 0;
});

async function timed<T>(what: string, body: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await body();
  const ms = performance.now() - started;
  console.info(`[testing kit] ${what}: ${ms.toFixed(0)} ms wall`);
  // Hours of database time in seconds of wall time at most (well under one on an idle machine).
  expect(ms).toBeLessThan(5_000);
  return result;
}

describe('runUntilIdle', () => {
  it('drives runs to the end and reports the runs it touched', async () => {
    const { runId } = await env.client.start(charge, { orderId: 'o-1', cents: 500 });
    const report = await env.runUntilIdle();
    expect(report).toMatchObject({
      runs: [{ id: runId, workflow: 'kit-charge@1', status: 'completed' }],
      crashedAt: undefined,
      heldByCrashedWorker: [],
    });
    expect(report.events.some((e) => e.type === 'step-succeeded' && e.step === 'charge')).toBe(true);
    await env.assertLedger(runId, { recorded: { charge: ['charge:o-1'], note: ['note:ch_1'] } });
  });

  it('does not wait for what is due later, and touches nothing when nothing is due', async () => {
    const { runId } = await env.client.start(napper, { id: 'n-1' });
    const first = await env.runUntilIdle();
    expect(first.runs).toEqual([{ id: runId, workflow: 'kit-napper@1', status: 'waiting' }]);
    expect((await env.runUntilIdle()).runs).toEqual([]);
  });

  it('refuses overlapping calls, and a clock that goes back', async () => {
    const running = env.runUntilIdle();
    await expect(env.runUntilIdle()).rejects.toThrow(/still running; await it first/);
    await expect(env.advanceTime(1)).rejects.toThrow(/still running/);
    await running;
    await expect(env.advanceTime(-1)).rejects.toThrow(/time only moves forward/);
  });
});

describe('advanceTime', () => {
  it('makes a one-hour retry backoff due', async () => {
    flakyFailures.remaining = 1;
    const { runId } = await env.client.start(flaky, { id: 'f-1' });
    expect((await env.runUntilIdle()).runs[0]?.status).toBe('pending');
    const run = await env.client.getRun(runId);
    expect(run.run_after.getTime() - (await env.now()).getTime()).toBeGreaterThan(HOUR - 60_000);
    await timed('retry backoff of 1 hour', async () => {
      await env.advanceTime(HOUR);
      expect((await env.runUntilIdle()).runs).toEqual([{ id: runId, workflow: 'kit-flaky@1', status: 'completed' }]);
    });
    expect((await env.client.getRun(runId)).output).toEqual({ call: { attempt: 2 } });
  });

  it('wakes a sleep of one day, and not a minute early', async () => {
    const { runId } = await env.client.start(napper, { id: 'n-2' });
    await env.runUntilIdle();
    await timed('sleep of 1 day', async () => {
      await env.advanceTime(24 * HOUR - 60_000);
      expect((await env.runUntilIdle()).runs).toEqual([]);
      await env.advanceTime(60_000);
      await env.runUntilIdle();
    });
    expect(await env.client.getRun(runId)).toMatchObject({ status: 'completed', output: { after: { woke: true } } });
  });

  it('times a waitFor out after its hour, and an event before it is taken instead', async () => {
    const late = await env.client.start(awaitSettled, { orderId: 'late' });
    const onTime = await env.client.start(awaitSettled, { orderId: 'on-time' });
    await env.runUntilIdle();
    await timed('waitFor timeout of 1 hour', async () => {
      await env.advanceTime(HOUR / 2);
      await env.client.sendEvent(settled, 'on-time', { orderId: 'on-time' });
      await env.runUntilIdle();
      expect((await env.client.getRun(late.runId)).status).toBe('waiting');
      await env.advanceTime(HOUR / 2);
      await env.runUntilIdle();
    });
    expect(await env.client.getRun(late.runId)).toMatchObject({
      status: 'completed',
      output: { outcome: { status: 'timeout' } },
    });
    expect(await env.client.getRun(onTime.runId)).toMatchObject({
      status: 'completed',
      output: { outcome: { status: 'received' } },
    });
  });

  it('cancels a run at its workflow deadline', async () => {
    const { runId } = await env.client.start(deadlined, { orderId: 'd-1' });
    await env.runUntilIdle();
    await timed('workflow timeout of 1 hour', async () => {
      await env.advanceTime(HOUR);
      await env.runUntilIdle();
    });
    expect((await env.client.getRun(runId)).status).toBe('cancelled');
  });

  it('closes a debounce window', async () => {
    const debounce = { key: 'o-9', windowMs: 10 * 60_000, keep: 'last' } as const;
    const { runId } = await env.client.start(charge, { orderId: 'o-9', cents: 100 }, { debounce });
    await env.client.start(charge, { orderId: 'o-9', cents: 300 }, { debounce });
    expect((await env.runUntilIdle()).runs).toEqual([]);
    await env.advanceTime(10 * 60_000);
    expect((await env.runUntilIdle()).runs).toEqual([{ id: runId, workflow: 'kit-charge@1', status: 'completed' }]);
    expect([...provider.charges.values()]).toEqual([{ id: 'ch_1', cents: 300 }]);
  });
});

describe('crashAt', () => {
  it('a worker that dies after the provider applied the charge leaves an intent; after its lease and the horizon, reconcile records the one charge', async () => {
    const { runId } = await env.client.start(charge, { orderId: 'o-2', cents: 700 });
    env.crashAt('after-perform');
    const crashed = await env.runUntilIdle();
    expect(crashed).toMatchObject({ crashedAt: 'after-perform', heldByCrashedWorker: [runId] });
    expect(provider.calls).toBe(1);
    // Nothing after the crash reached the database: the run is held, its intent open.
    expect(await env.client.getRun(runId)).toMatchObject({ status: 'running' });
    expect((await env.ledger(runId)).map((r) => r.status)).toEqual(['intent']);
    await expect(env.assertLedger(runId)).rejects.toThrow(
      /expected 0 open intent\(s\), found 1: step "charge" key "charge:o-2"/,
    );

    // Within the lease nobody may take the run.
    expect((await env.runUntilIdle()).runs).toEqual([]);
    await env.advanceTime(env.leaseMs);
    // Taken over; the intent's horizon (lease + perform timeout) has not passed: asked no one, called no one.
    await env.runUntilIdle();
    expect(provider.calls).toBe(1);
    await env.advanceTime(HOUR);
    const resumed = await env.runUntilIdle();
    expect(resumed.crashedAt).toBeUndefined();
    expect(await env.client.getRun(runId)).toMatchObject({
      status: 'completed',
      output: { charge: { chargeId: 'ch_1' } },
    });
    expect(provider.calls).toBe(1);
    await env.assertLedger(runId, { recorded: { charge: ['charge:o-2'], note: ['note:ch_1'] } });
    await env.expectEachKeyOnce();
  });

  it('a crash inside a transactional step writes nothing of it; the next worker commits it once', async () => {
    const notes = async () =>
      (await sql<{ id: string }>`SELECT id FROM app.note ORDER BY id`.execute(env.store.db)).rows.map((r) => r.id);
    const { runId } = await env.client.start(charge, { orderId: 'o-3', cents: 900 });
    env.crashAt('inside-transactional-handler'); // the handler's INSERT is sent, its transaction not committed
    expect((await env.runUntilIdle()).crashedAt).toBe('inside-transactional-handler');
    expect((await env.ledger(runId)).map((r) => `${r.step_name}:${r.status}`)).toEqual(['charge:recorded']);
    expect(await notes()).toEqual([]);
    await env.advanceTime(env.leaseMs);
    await env.runUntilIdle();
    expect((await env.client.getRun(runId)).status).toBe('completed');
    expect(await notes()).toEqual(['note:ch_1']);
    await env.assertLedger(runId, { recorded: { charge: ['charge:o-3'], note: ['note:ch_1'] } });
  });

  it('refuses an unknown fault point', () => {
    expect(() => env.crashAt('after-lunch' as never)).toThrow(/unknown fault point "after-lunch"/);
  });
});

describe('createTestEnvironment', () => {
  it('refuses bad options before it boots anything', async () => {
    await expect(createTestEnvironment({ workflows: [], leaseMs: 0, resetSchemas: ['ledgerflow'] })).rejects.toThrow(
      'Invalid test environment options: workflows is empty: pass the registrations of the workflows under test ' +
        '(e.g. [refundRegistration(fakePayments)]); leaseMs must be > 0 (got 0); resetSchemas may not name "ledgerflow".',
    );
  });
});

describe('reset', () => {
  it('empties runs, ledger and the listed app schemas, and puts the clock back', async () => {
    await env.client.start(charge, { orderId: 'o-4', cents: 100 });
    await env.runUntilIdle();
    await sql`INSERT INTO app.note VALUES ('x')`.execute(env.store.db);
    await env.advanceTime(48 * HOUR);
    await env.reset();
    expect(await env.ledger()).toEqual([]);
    expect(await env.client.listRuns()).toEqual([]);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM app.note`.execute(env.store.db);
    expect(rows[0]!.n).toBe(0);
    expect(Math.abs((await env.now()).getTime() - Date.now())).toBeLessThan(60_000);
    // Still usable: migrations and versions stay.
    const { runId } = await env.client.start(charge, { orderId: 'o-4', cents: 100 });
    await env.runUntilIdle();
    expect((await env.client.getRun(runId)).status).toBe('completed');
  });
});
