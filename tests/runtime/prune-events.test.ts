import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type Client } from '../../runtime/client/client.js';
import { DuplicateEventError, ValidationError } from '../../runtime/errors.js';
import { pruneEventsBatchStatement } from '../../runtime/retention/event-prune-statements.js';
import { pruneRuns } from '../../runtime/retention/prune.js';
import { SQLSTATE, sqlStateOf } from '../../runtime/store/sqlstate.js';
import type { Store } from '../../runtime/store/store.js';
import type { LedgerflowDatabase } from '../../runtime/store/tables.js';
import { createWorker } from '../../runtime/worker/worker.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runCli } from '../support/run-cli.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { awaitPayment, paymentSettled, WAIT_WORKFLOWS, waitHandlers } from './fixtures/wait-workflows.js';

/*
 * Event retention (core 0016, runtime/retention/prune.ts): consumed events older than a cut-off go,
 * unconsumed ones only when asked; an event with a dedupe key leaves a tombstone, so the same send
 * stores nothing afterwards — and the tombstone goes only with `archiveOlderThanMs`.
 */

const DAY = 86_400_000;
const LONG_AGO = 30 * DAY;

async function drainOnce(store: Store): Promise<void> {
  const worker = createWorker({ store, workflows: waitHandlers(), pollIntervalMs: 20, reconcileIntervalMs: 0 });
  try {
    await worker.drain({ timeoutMs: 20_000 });
  } finally {
    await worker.stop();
  }
}

/** Moves events' sending and taking `days` into the past. */
async function age(
  db: Kysely<LedgerflowDatabase>,
  keys: readonly string[],
  days: { readonly sent: number; readonly consumed: number },
): Promise<void> {
  await sql`UPDATE ledgerflow.event
               SET created_at = created_at - ${days.sent * DAY}::double precision * interval '1 millisecond',
                   consumed_at = consumed_at - ${days.consumed * DAY}::double precision * interval '1 millisecond'
             WHERE correlation_key = ANY(${[...keys]}::text[])`.execute(db);
}

async function eventKeys(db: Kysely<LedgerflowDatabase>, prefix: string): Promise<string[]> {
  const { rows } = await sql<{ key: string }>`SELECT correlation_key AS key FROM ledgerflow.event
                                               WHERE correlation_key LIKE ${`${prefix}%`} ORDER BY 1`.execute(db);
  return rows.map((r) => r.key);
}

const settled = (orderId: string, paid = true) => ({ orderId, paid });

describeStores('prune events', (getStore) => {
  let client: Client;
  beforeAll(async () => {
    await migrateForTest(getStore(), WAIT_WORKFLOWS);
    client = createClient({ store: getStore(), workflows: WAIT_WORKFLOWS });
  });

  it('deletes events consumed before the cut-off and nothing else; a dedupe key stays as a tombstone, so the same send stores nothing', async () => {
    const { db } = getStore();
    // a-1 and a-3 are taken by runs, a-1 by its dedupe key; a-2 nobody waits for; a-4 is taken recently.
    const taker1 = await client.start(awaitPayment, { orderId: 'a-1', timeoutMs: 60_000 });
    const taker3 = await client.start(awaitPayment, { orderId: 'a-3', timeoutMs: 60_000 });
    await client.start(awaitPayment, { orderId: 'a-4', timeoutMs: 60_000 });
    const sent1 = await client.sendEvent(paymentSettled, 'a-1', settled('a-1'), { dedupeKey: 'psp-a-1' });
    await client.sendEvent(paymentSettled, 'a-2', settled('a-2'), { dedupeKey: 'psp-a-2' });
    await client.sendEvent(paymentSettled, 'a-3', settled('a-3'));
    await client.sendEvent(paymentSettled, 'a-4', settled('a-4'), { dedupeKey: 'psp-a-4' });
    await drainOnce(getStore());
    await age(db, ['a-1', 'a-2', 'a-3'], { sent: 40, consumed: 10 });

    const dry = await pruneRuns(db, { olderThanMs: LONG_AGO, eventsOlderThanMs: 7 * DAY, dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, runsPruned: 0, eventsPruned: 2, eventsArchived: 1 });
    expect(await eventKeys(db, 'a-')).toEqual(['a-1', 'a-2', 'a-3', 'a-4']);

    const batches: string[] = [];
    const report = await pruneRuns(db, {
      olderThanMs: LONG_AGO,
      eventsOlderThanMs: 7 * DAY,
      batchSize: 1,
      onBatch: (b) => batches.push(`${b.table}:${b.runs}`),
    });
    expect(report).toMatchObject({
      dryRun: false,
      runsPruned: 0,
      eventsPruned: 2,
      eventsArchived: 1,
      eventArchiveDeleted: 0,
    });
    expect(batches).toEqual(['events:1', 'events:1']);
    expect(await eventKeys(db, 'a-')).toEqual(['a-2', 'a-4']);

    // The runs that took them keep what they took.
    const took = async (runId: string) =>
      (await client.getRun(runId)).steps.find((s) => s.step_name === 'settled')?.output;
    expect(await took(taker1.runId)).toMatchObject({
      status: 'received',
      payload: settled('a-1'),
      eventId: sent1.eventId,
    });
    expect(await took(taker3.runId)).toMatchObject({ status: 'received', payload: settled('a-3') });
    const { rows: tombstones } = await sql<{
      name: string;
      dedupe_key: string;
      id: string;
      correlation_key: string;
      consumed_by_run: string;
    }>`
      SELECT name, dedupe_key, id, correlation_key, consumed_by_run FROM ledgerflow.event_archive`.execute(db);
    expect(tombstones).toEqual([
      {
        name: paymentSettled.name,
        dedupe_key: 'psp-a-1',
        id: sent1.eventId,
        correlation_key: 'a-1',
        consumed_by_run: taker1.runId,
      },
    ]);

    // The webhook delivered again: nothing stored, nobody woken, the first event named.
    const waiter = await client.start(awaitPayment, { orderId: 'a-1', timeoutMs: 60_000 });
    expect(await client.sendEvent(paymentSettled, 'a-1', settled('a-1'), { dedupeKey: 'psp-a-1' })).toEqual({
      eventId: sent1.eventId,
      created: false,
      woke: 0,
    });
    expect(await eventKeys(db, 'a-1')).toEqual([]);
    // Another event under that key is refused as for a live one.
    await expect(
      client.sendEvent(paymentSettled, 'a-1', settled('a-1', false), { dedupeKey: 'psp-a-1' }),
    ).rejects.toThrow(DuplicateEventError);
    await expect(client.sendEvent(paymentSettled, 'a-9', settled('a-1'), { dedupeKey: 'psp-a-1' })).rejects.toThrow(
      DuplicateEventError,
    );
    await client.cancel(waiter.runId);
  });

  it('deletes events nobody took only when asked; a dedupe key stays as a tombstone', async () => {
    const { db } = getStore();
    // Old unconsumed events earlier tests left (none when this test runs alone).
    const before = await pruneRuns(db, { olderThanMs: LONG_AGO, unconsumedEventsOlderThanMs: 7 * DAY, dryRun: true });
    await client.sendEvent(paymentSettled, 'u-1', settled('u-1'), { dedupeKey: 'psp-u-1' });
    await client.sendEvent(paymentSettled, 'u-2', settled('u-2'));
    await age(db, ['u-1'], { sent: 10, consumed: 0 });

    expect((await pruneRuns(db, { olderThanMs: LONG_AGO, eventsOlderThanMs: 7 * DAY })).eventsPruned).toBe(0);
    expect(await eventKeys(db, 'u-')).toEqual(['u-1', 'u-2']);
    const report = await pruneRuns(db, { olderThanMs: LONG_AGO, unconsumedEventsOlderThanMs: 7 * DAY });
    expect(report).toMatchObject({ eventsPruned: before.eventsPruned + 1, eventsArchived: before.eventsArchived + 1 });
    expect(await eventKeys(db, 'u-')).toEqual(['u-2']);
    expect((await client.sendEvent(paymentSettled, 'u-1', settled('u-1'), { dedupeKey: 'psp-u-1' })).created).toBe(
      false,
    );
  });

  it('deletes event tombstones with archiveOlderThanMs, by when the event was sent; then the same send is stored again', async () => {
    const { db } = getStore();
    const first = await client.sendEvent(paymentSettled, 't-1', settled('t-1'), { dedupeKey: 'psp-t-1' });
    await age(db, ['t-1'], { sent: 50, consumed: 0 });
    await pruneRuns(db, { olderThanMs: LONG_AGO, unconsumedEventsOlderThanMs: 7 * DAY });
    expect((await client.sendEvent(paymentSettled, 't-1', settled('t-1'), { dedupeKey: 'psp-t-1' })).created).toBe(
      false,
    );

    const kept = await pruneRuns(db, { olderThanMs: LONG_AGO, archiveOlderThanMs: 60 * DAY, dryRun: true });
    expect(kept.eventArchiveDeleted).toBe(0);
    const dry = await pruneRuns(db, { olderThanMs: LONG_AGO, archiveOlderThanMs: 45 * DAY, dryRun: true });
    expect(dry.eventArchiveDeleted).toBeGreaterThanOrEqual(1);
    const report = await pruneRuns(db, { olderThanMs: LONG_AGO, archiveOlderThanMs: 45 * DAY });
    expect(report.eventArchiveDeleted).toBe(dry.eventArchiveDeleted);
    const again = await client.sendEvent(paymentSettled, 't-1', settled('t-1'), { dedupeKey: 'psp-t-1' });
    expect(again.created).toBe(true);
    expect(again.eventId).not.toBe(first.eventId);
  });

  it('keeps the event archive append-only: an update is refused for every role', async () => {
    const { db } = getStore();
    await client.sendEvent(paymentSettled, 'i-1', settled('i-1'), { dedupeKey: 'psp-i-1' });
    await age(db, ['i-1'], { sent: 10, consumed: 0 });
    await pruneRuns(db, { olderThanMs: LONG_AGO, unconsumedEventsOlderThanMs: 7 * DAY });
    const error = await sql`UPDATE ledgerflow.event_archive SET correlation_key = 'other' WHERE dedupe_key = 'psp-i-1'`
      .execute(db)
      .catch((e: unknown) => e);
    expect(sqlStateOf(error)).toBe(SQLSTATE.RECORD_IMMUTABLE);
    expect(String((error as Error).message)).toContain('the event archive is append-only');
  });

  it('refuses bad event retention options before deleting anything', async () => {
    const { db } = getStore();
    await expect(pruneRuns(db, { olderThanMs: LONG_AGO, eventsOlderThanMs: -1 })).rejects.toThrow(ValidationError);
    await expect(
      pruneRuns(db, { olderThanMs: DAY, unconsumedEventsOlderThanMs: 40 * DAY, archiveOlderThanMs: 30 * DAY }),
    ).rejects.toThrow('archiveOlderThanMs: must be at least unconsumedEventsOlderThanMs');
    const usage = await runCli([
      'prune',
      '--completed-older-than',
      '30d',
      '--events-older-than',
      '60d',
      '--archive-older-than',
      '40d',
    ]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--archive-older-than (40d) must be at least --events-older-than (60d)');
  });
});

describe('prune events against concurrent sends and takes [pg]', () => {
  let store: TestStore;
  let client: Client;
  let other: pg.Client;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, WAIT_WORKFLOWS);
    client = createClient({ store, workflows: WAIT_WORKFLOWS });
    other = new pg.Client({ connectionString: store.url! });
    await other.connect();
  });
  afterAll(async () => {
    await other?.end().catch(() => {});
    await store?.close();
  });

  it('a step taking an event while a prune deletes the oldest one takes the next, not nothing', async () => {
    await client.sendEvent(paymentSettled, 'k-1', settled('k-1', false));
    await age(store.db, ['k-1'], { sent: 10, consumed: 0 });
    const fresh = await client.sendEvent(paymentSettled, 'k-1', settled('k-1', true));
    const run = await client.start(awaitPayment, { orderId: 'k-1', timeoutMs: 60_000 });
    await other.query('BEGIN');
    let draining: Promise<void> | undefined;
    try {
      // The prune holds (and has deleted, uncommitted) the older event when the run looks for one.
      const { sql: text, parameters } = pruneEventsBatchStatement(
        { consumed: false, olderThanMs: 7 * DAY },
        10,
      ).compile(store.db);
      expect((await other.query<{ events: number }>(text, [...parameters])).rows[0]!.events).toBe(1);
      draining = drainOnce(store);
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      await other.query('COMMIT');
    }
    await draining;
    const details = await client.getRun(run.runId);
    expect(details.status).toBe('completed');
    expect(details.steps.find((s) => s.step_name === 'settled')?.output).toMatchObject({
      status: 'received',
      eventId: fresh.eventId,
    });
  });

  it('a send racing the prune of its event waits for it and returns the tombstone, never a second event', async () => {
    // A consumed event: its prune takes no key lock (no step can take it any more), so only
    // ledgerflow.pruned_event stands between the resend and a second stored event.
    await client.start(awaitPayment, { orderId: 'r-1', timeoutMs: 60_000 });
    const first = await client.sendEvent(paymentSettled, 'r-1', settled('r-1'), { dedupeKey: 'psp-r-1' });
    await drainOnce(store);
    await age(store.db, ['r-1'], { sent: 10, consumed: 10 });
    await other.query('BEGIN');
    let resent: Promise<unknown> | undefined;
    try {
      const { sql: text, parameters } = pruneEventsBatchStatement({ consumed: true, olderThanMs: 7 * DAY }, 10).compile(
        store.db,
      );
      const { rows } = await other.query<{ events: number }>(text, [...parameters]);
      expect(rows[0]!.events).toBe(1);
      // The prune holds the event (deleted, tombstone written, not committed yet) while the same webhook arrives again.
      resent = client.sendEvent(paymentSettled, 'r-1', settled('r-1'), { dedupeKey: 'psp-r-1' });
      const early = await Promise.race([
        resent.then(() => 'answered'),
        new Promise((resolve) => setTimeout(() => resolve('waiting'), 300)),
      ]);
      expect(early).toBe('waiting');
    } finally {
      await other.query('COMMIT');
    }
    expect(await resent).toEqual({ eventId: first.eventId, created: false, woke: 0 });
    expect(await eventKeys(store.db, 'r-')).toEqual([]);
  });

  it('prunes events through the CLI, and a worker prunes consumed events with retention.eventsOlderThanMs', async () => {
    await client.start(awaitPayment, { orderId: 'c-1', timeoutMs: 60_000 });
    await client.sendEvent(paymentSettled, 'c-1', settled('c-1'), { dedupeKey: 'psp-c-1' });
    await client.sendEvent(paymentSettled, 'c-2', settled('c-2'));
    await drainOnce(store);
    await age(store.db, ['c-1', 'c-2'], { sent: 10, consumed: 10 });
    const url = ['--database-url', store.url!];
    const dry = await runCli([
      'prune',
      '--completed-older-than',
      '30d',
      '--unconsumed-events-older-than',
      '7d',
      '--dry-run',
      ...url,
    ]);
    expect(dry).toMatchObject({ code: 0, stderr: '' });
    expect(dry.stdout).toContain('1 event(s) would be pruned (0 kept as tombstones)');
    const pruned = await runCli([
      'prune',
      '--completed-older-than',
      '30d',
      '--unconsumed-events-older-than',
      '7d',
      ...url,
    ]);
    expect(pruned.stdout).toContain('1 event(s) pruned (0 kept as tombstones)');
    expect(await eventKeys(store.db, 'c-')).toEqual(['c-1']);

    const events: string[] = [];
    const pruning = createWorker({
      store,
      workflows: waitHandlers(),
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      retention: { completedOlderThanMs: LONG_AGO, eventsOlderThanMs: 7 * DAY, intervalMs: 50 },
      onEvent: (e) => {
        if (e.type === 'prune-pass') events.push(`${e.report.eventsPruned}/${e.report.eventsArchived}`);
      },
    });
    await pruning.start();
    try {
      const deadline = Date.now() + 10_000;
      while (events.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      await pruning.stop();
    }
    expect(events[0]).toBe('1/1');
    expect(await eventKeys(store.db, 'c-')).toEqual([]);
  });
});
