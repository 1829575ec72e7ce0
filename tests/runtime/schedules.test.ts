import { sql } from 'kysely';
import { beforeAll, expect, it } from 'vitest';
import { schedule, workflow, type AnySchedule } from 'ledgerflow/dsl';
import { z } from 'zod';
import {
  createClient,
  createWorker,
  MigrationError,
  ScheduleNotFoundError,
  type Client,
  type Store,
} from 'ledgerflow/runtime';
import { runSchedulePass } from 'ledgerflow/operator';
import { registerSchedules } from '../../runtime/schedules/register-schedules.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { eventLog, waitUntil } from './fixtures/run-helpers.js';
import { SCHEDULE_WORKFLOWS, scheduled, scheduledHandlers, scheduleOf } from './fixtures/schedule-workflows.js';

const HOUR = 3_600_000;

async function dbNow(store: Store): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`SELECT statement_timestamp() AS now`.execute(store.db);
  return rows[0]!.now;
}

async function scheduleRow(store: Store, name: string) {
  return store.db.selectFrom('ledgerflow.schedule').selectAll().where('name', '=', name).executeTakeFirstOrThrow();
}

async function setNextTick(store: Store, name: string, at: Date): Promise<void> {
  await store.db.updateTable('ledgerflow.schedule').set({ next_tick_at: at }).where('name', '=', name).execute();
}

/** Runs started for a schedule, by tick (from the dedupe key), oldest first. */
async function runsOf(
  store: Store,
  name: string,
): Promise<Array<{ tick: string; id: string; input: unknown; status: string }>> {
  const rows = await store.db
    .selectFrom('ledgerflow.workflow_run')
    .select(['id', 'dedupe_key', 'input', 'status'])
    .where('dedupe_key', 'like', `schedule:${name}:%`)
    .orderBy('dedupe_key')
    .execute();
  return rows.map((r) => ({
    tick: r.dedupe_key!.slice(`schedule:${name}:`.length),
    id: r.id,
    input: r.input,
    status: r.status,
  }));
}

/**
 * An hourly cron whose latest tick is about half an hour before the database's now, and that
 * latest tick: ticks that are missed whatever the minute the test runs at.
 */
async function halfHourAgo(store: Store): Promise<{ cron: string; latest: Date }> {
  const now = await dbNow(store);
  const minute = (now.getUTCMinutes() + 30) % 60;
  const latest = new Date(now);
  latest.setUTCMinutes(minute, 0, 0);
  if (latest.getTime() > now.getTime()) latest.setTime(latest.getTime() - HOUR);
  return { cron: `${minute} * * * *`, latest };
}

/** Seconds as ISO strings, from `first` on, `count` of them. */
const seconds = (first: string, count: number) =>
  Array.from({ length: count }, (_, i) => new Date(Date.parse(first) + i * 1_000).toISOString());

/**
 * Schedules on PostgreSQL and PGlite: registration, ticks that start one run each (dedupe key
 * `schedule:<name>:<tick>`), catch-up policies, failures, pause/resume, and a worker that ticks
 * every second across a restart.
 */
describeStores('schedules', (getStore) => {
  let client: Client;
  const pass = (schedules: readonly AnySchedule[]) =>
    runSchedulePass({ db: getStore().db, schedules, migrated: new Set() });

  beforeAll(async () => {
    await migrateForTest(getStore(), SCHEDULE_WORKFLOWS);
    client = createClient({ store: getStore() });
  });

  it('registers a schedule with its first tick after now, keeps it (and paused) when registered again, and starts over when the cron changes', async () => {
    const store = getStore();
    const daily = scheduleOf('reg-daily', '0 3 * * *', { timezone: 'Europe/Berlin' });
    const before = await dbNow(store);
    await registerSchedules(store.db, [daily]);
    const first = await scheduleRow(store, 'reg-daily');
    expect(first).toMatchObject({
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      workflow_name: 'wt-scheduled',
      workflow_version: 1,
      catch_up: 'skip',
      paused: false,
    });
    expect(first.next_tick_at.getTime()).toBeGreaterThan(before.getTime());
    expect(first.next_tick_at.getTime() - before.getTime()).toBeLessThanOrEqual(24 * HOUR + HOUR);

    const moved = new Date(first.next_tick_at.getTime() - 24 * HOUR);
    await setNextTick(store, 'reg-daily', moved);
    expect(await client.pauseSchedule('reg-daily')).toBe(true);
    await registerSchedules(store.db, [
      scheduleOf('reg-daily', '0 3 * * *', { timezone: 'Europe/Berlin', catchUp: 'latest' }),
    ]);
    const again = await scheduleRow(store, 'reg-daily');
    expect(again).toMatchObject({ paused: true, catch_up: 'latest', next_tick_at: moved });
    expect(again.definition_hash).not.toBe(first.definition_hash);

    await registerSchedules(store.db, [scheduleOf('reg-daily', '0 4 * * *', { timezone: 'Europe/Berlin' })]);
    const changed = await scheduleRow(store, 'reg-daily');
    expect(changed).toMatchObject({ cron: '0 4 * * *', paused: true });
    expect(changed.next_tick_at.getTime()).toBeGreaterThan(before.getTime());
  });

  it('refuses to start a worker whose schedule starts a workflow that is not migrated', async () => {
    const unmigrated = workflow('wt-never-migrated', { version: 1, input: z.object({}) }).step('noop', {
      output: z.object({}),
    });
    const worker = createWorker({
      store: getStore(),
      workflows: [scheduledHandlers()],
      schedules: [schedule('orphan', { cron: '0 * * * *', workflow: unmigrated, input: () => ({}) })],
    });
    await expect(worker.start()).rejects.toThrow(MigrationError);
    await expect(worker.start()).rejects.toThrow(
      /schedule "orphan" starts workflow "wt-never-migrated" v1, which is not migrated/,
    );
    expect(() =>
      createWorker({
        store: getStore(),
        workflows: [scheduledHandlers()],
        schedules: [scheduleOf('twice', '0 * * * *'), scheduleOf('twice', '0 * * * *')],
      }),
    ).toThrow(/Schedule "twice" is given twice/);
  });

  it('catch-up: skip starts no missed tick, latest the most recent one, all up to its max — each once, however many passes', async () => {
    const store = getStore();
    const { cron, latest } = await halfHourAgo(store);
    const policies = {
      'cu-skip': scheduleOf('cu-skip', cron),
      'cu-latest': scheduleOf('cu-latest', cron, { catchUp: 'latest' }),
      'cu-all-2': scheduleOf('cu-all-2', cron, { catchUp: { all: { max: 2 } } }),
      'cu-all-10': scheduleOf('cu-all-10', cron, { catchUp: { all: { max: 10 } } }),
    };
    const schedules = Object.values(policies);
    await registerSchedules(store.db, schedules);
    // Nothing ran for the last four ticks.
    const missedFrom = new Date(latest.getTime() - 3 * HOUR);
    for (const name of Object.keys(policies)) await setNextTick(store, name, missedFrom);

    const report = await pass(schedules);
    expect(report.failed).toEqual([]);
    const hours = (n: number) =>
      Array.from({ length: n }, (_, i) => new Date(latest.getTime() - (n - 1 - i) * HOUR).toISOString());
    expect((await runsOf(store, 'cu-skip')).map((r) => r.tick)).toEqual([]);
    expect((await runsOf(store, 'cu-latest')).map((r) => r.tick)).toEqual(hours(1));
    expect((await runsOf(store, 'cu-all-2')).map((r) => r.tick)).toEqual(hours(2));
    expect((await runsOf(store, 'cu-all-10')).map((r) => r.tick)).toEqual(hours(4));
    expect(Object.fromEntries(report.ticked.map((t) => [t.schedule, t.skipped]))).toEqual({
      'cu-skip': true,
      'cu-latest': true,
      'cu-all-2': true,
      'cu-all-10': false,
    });
    // Each run's input is built from its own tick, and the schedule moved past now.
    const [run] = await runsOf(store, 'cu-latest');
    expect(run!.input).toEqual({ scheduledAt: latest.toISOString(), label: 'cu-latest' });
    for (const name of Object.keys(policies)) {
      const row = await scheduleRow(store, name);
      expect(row.next_tick_at).toEqual(new Date(latest.getTime() + HOUR));
    }
    expect(await scheduleRow(store, 'cu-all-10')).toMatchObject({
      last_tick_at: latest,
      last_error: null,
      failures: 0,
    });

    expect(await pass(schedules)).toEqual({ ticked: [], failed: [] });
    expect(await runsOf(store, 'cu-all-10')).toHaveLength(4);
  });

  it('a tick whose run already exists keeps that run; concurrent passes start each tick once', async () => {
    const store = getStore();
    const { cron, latest } = await halfHourAgo(store);
    const adopt = scheduleOf('adopt', cron, { catchUp: { all: { max: 3 } } });
    const race = scheduleOf('race', cron, { catchUp: { all: { max: 5 } } });
    await registerSchedules(store.db, [adopt, race]);
    const from = new Date(latest.getTime() - 2 * HOUR);
    await setNextTick(store, 'adopt', from);
    await setNextTick(store, 'race', new Date(latest.getTime() - 4 * HOUR));
    const existing = await client.start(
      scheduled,
      { scheduledAt: from.toISOString(), label: 'adopt' },
      { dedupeKey: `schedule:adopt:${from.toISOString()}` },
    );

    const reports = await Promise.all([pass([adopt, race]), pass([adopt, race]), pass([race, adopt])]);
    const adopted = await runsOf(store, 'adopt');
    expect(adopted.map((r) => r.tick)).toEqual(
      [from, new Date(from.getTime() + HOUR), latest].map((d) => d.toISOString()),
    );
    expect(adopted[0]!.id).toBe(existing.runId);
    expect(await runsOf(store, 'race')).toHaveLength(5);
    // Each schedule was ticked by exactly one of the three passes.
    const ticked = reports.flatMap((r) => r.ticked.map((t) => t.schedule)).sort();
    expect(ticked).toEqual(['adopt', 'race']);
    expect(reports.flatMap((r) => r.ticked).find((t) => t.schedule === 'adopt')!.runIds[0]).toBe(existing.runId);
  });

  it('a tick whose input throws or is invalid starts nothing, keeps its place and backs off; a fixed definition starts it', async () => {
    const store = getStore();
    const { cron, latest } = await halfHourAgo(store);
    const throwing = schedule('broken', {
      cron,
      workflow: scheduled,
      catchUp: 'latest',
      input: () => {
        throw new Error('no config for this tick');
      },
    });
    const invalid = schedule('invalid', {
      cron,
      workflow: scheduled,
      catchUp: 'latest',
      input: ({ scheduledAt }) => ({ scheduledAt, label: 7 }) as never,
    });
    await registerSchedules(store.db, [throwing, invalid]);
    await setNextTick(store, 'broken', latest);
    await setNextTick(store, 'invalid', latest);

    const before = await dbNow(store);
    const report = await pass([throwing, invalid]);
    expect(report.ticked).toEqual([]);
    expect(report.failed.map((f) => [f.schedule, f.tick.toISOString(), f.error.name]).sort()).toEqual([
      ['broken', latest.toISOString(), 'ScheduleInputError'],
      ['invalid', latest.toISOString(), 'ValidationError'],
    ]);
    expect(report.failed.find((f) => f.schedule === 'broken')!.error.message).toBe(
      `The input function of schedule "broken" threw for the tick ${latest.toISOString()}: no config for this tick`,
    );
    const row = await scheduleRow(store, 'broken');
    expect(row).toMatchObject({
      next_tick_at: latest,
      failures: 1,
      last_tick_at: null,
      last_error: expect.objectContaining({ name: 'ScheduleInputError' }),
    });
    const backoff = row.retry_at!.getTime() - before.getTime();
    expect(backoff).toBeGreaterThanOrEqual(4_900);
    expect(backoff).toBeLessThan(60_000);
    expect(await runsOf(store, 'broken')).toEqual([]);
    // Backing off: the next pass leaves it alone.
    expect((await pass([throwing])).failed).toEqual([]);

    const fixed = scheduleOf('broken', cron, { catchUp: 'latest' });
    await registerSchedules(store.db, [fixed]);
    expect(await scheduleRow(store, 'broken')).toMatchObject({
      failures: 0,
      last_error: null,
      retry_at: null,
      next_tick_at: latest,
    });
    expect((await pass([fixed])).ticked.map((t) => t.ticks.map((d) => d.toISOString()))).toEqual([
      [latest.toISOString()],
    ]);
    expect((await runsOf(store, 'broken')).map((r) => r.input)).toEqual([
      { scheduledAt: latest.toISOString(), label: 'broken' },
    ]);
  });

  it('only code with the registered definition ticks a schedule (an old deploy leaves a changed one alone)', async () => {
    const store = getStore();
    const { cron, latest } = await halfHourAgo(store);
    const current = scheduleOf('deployed', cron, { catchUp: 'latest' });
    const old = scheduleOf('deployed', `*/5 * * * *`, { catchUp: 'latest' });
    await registerSchedules(store.db, [current]);
    await setNextTick(store, 'deployed', latest);
    expect(await pass([old])).toEqual({ ticked: [], failed: [] });
    expect(await runsOf(store, 'deployed')).toEqual([]);
    expect((await pass([current])).ticked).toHaveLength(1);
  });

  it('pause stops ticks; resume goes on from the next tick after now, leaving the paused ones out; both are idempotent', async () => {
    const store = getStore();
    const { cron, latest } = await halfHourAgo(store);
    const paused = scheduleOf('pausable', cron, { catchUp: { all: { max: 10 } } });
    await registerSchedules(store.db, [paused]);
    await setNextTick(store, 'pausable', new Date(latest.getTime() - HOUR));
    expect(await client.pauseSchedule('pausable')).toBe(true);
    expect(await client.pauseSchedule('pausable')).toBe(false);
    expect(await pass([paused])).toEqual({ ticked: [], failed: [] });
    expect((await client.listSchedules()).find((s) => s.name === 'pausable')).toMatchObject({ paused: true });

    expect(await client.resumeSchedule('pausable')).toBe(true);
    expect(await client.resumeSchedule('pausable')).toBe(false);
    const row = await scheduleRow(store, 'pausable');
    expect(row).toMatchObject({ paused: false, next_tick_at: new Date(latest.getTime() + HOUR) });
    expect(await pass([paused])).toEqual({ ticked: [], failed: [] });
    expect(await runsOf(store, 'pausable')).toEqual([]);

    await expect(client.pauseSchedule('no-such')).rejects.toThrow(ScheduleNotFoundError);
    await expect(client.resumeSchedule('no-such')).rejects.toThrow(
      /No schedule "no-such" is registered in this database/,
    );
  });

  it('lists schedules with their next ticks, last tick and the last run with its status', async () => {
    const store = getStore();
    const { cron, latest } = await halfHourAgo(store);
    const listed = scheduleOf('listed', cron, { catchUp: 'latest' });
    await registerSchedules(store.db, [listed]);
    await setNextTick(store, 'listed', latest);
    const { ticked } = await pass([listed]);
    const summary = (await client.listSchedules({ ticks: 2 })).find((s) => s.name === 'listed');
    expect(summary).toMatchObject({
      cron,
      timezone: 'UTC',
      workflowName: 'wt-scheduled',
      workflowVersion: 1,
      catchUp: 'latest',
      paused: false,
      nextTicks: [new Date(latest.getTime() + HOUR), new Date(latest.getTime() + 2 * HOUR)],
      lastTickAt: latest,
      lastRunId: ticked[0]!.runIds[0],
      lastRunStatus: 'pending',
      lastError: null,
      failures: 0,
    });
    await expect(client.listSchedules({ ticks: 101 })).rejects.toThrow(/ticks must be an integer from 0 to 100/);
  });

  it('a worker starts one run per second of an every-second schedule, across its own restart', async () => {
    const store = getStore();
    const everySecond = scheduleOf('every-second', '* * * * * *');
    const log = eventLog();
    const options = {
      store,
      workflows: [scheduledHandlers()],
      schedules: [everySecond],
      scheduleIntervalMs: 100,
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    };
    const first = createWorker({ ...options, onEvent: log.onEvent });
    await first.start();
    await waitUntil('three ticks', async () => (await runsOf(store, 'every-second')).length >= 3);
    await first.stop();
    // Down for over a second: the ticks it missed are on time when the next worker looks.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const second = createWorker({ ...options, onEvent: log.onEvent });
    await second.start();
    const before = (await runsOf(store, 'every-second')).length;
    await waitUntil('three more ticks', async () => (await runsOf(store, 'every-second')).length >= before + 3);
    await second.stop();
    const finisher = createWorker({
      store,
      workflows: [scheduledHandlers()],
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    await finisher.drain();
    await finisher.stop();

    const runs = await runsOf(store, 'every-second');
    expect(runs.map((r) => r.tick)).toEqual(seconds(runs[0]!.tick, runs.length));
    expect(runs.every((r) => r.status === 'completed')).toBe(true);
    for (const r of runs) expect(r.input).toEqual({ scheduledAt: r.tick, label: 'every-second' });
    const reported = log.events.flatMap((e) => (e.type === 'schedule-ticked' ? e.ticks : []));
    expect(reported.sort()).toEqual(runs.map((r) => r.tick));
    expect(log.errors()).toEqual([]);
    expect((await scheduleRow(store, 'every-second')).last_tick_at).toEqual(new Date(runs.at(-1)!.tick));
  }, 60_000);
});
