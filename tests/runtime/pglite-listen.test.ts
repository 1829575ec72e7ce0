import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPGliteTestStore, type TestStore } from '../support/test-stores.js';
import { waitUntil } from './fixtures/run-helpers.js';

/**
 * PGlite is one session, which the Kysely driver hands to one holder at a time. LISTEN and
 * UNLISTEN must wait their turn like any query: issued inside another caller's open transaction,
 * they would take effect only if that transaction commits, and a rollback would undo them silently
 * (a subscription that never hears a NOTIFY, or one that cannot be dropped).
 */
describe('PGlite store: LISTEN/UNLISTEN between transactions', () => {
  let store: TestStore;
  let closed = false;

  beforeAll(async () => {
    store = await createPGliteTestStore();
  });
  afterAll(async () => {
    if (!closed) await store?.close();
  });

  /** A transaction that has run a statement and waits; `rollBack()` makes its callback throw. */
  const openTransaction = async (): Promise<{ rollBack: () => void; done: Promise<void> }> => {
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let rollBack!: () => void;
    const gate = new Promise<void>((resolve) => (rollBack = resolve));
    const done = store.db.transaction().execute(async (trx) => {
      await sql`SELECT 1`.execute(trx);
      entered();
      await gate;
      throw new Error('rolled back by the test');
    });
    done.catch(() => {});
    await inside;
    return { rollBack, done };
  };

  /** Gives `pending` a moment to settle (the unfixed store ran LISTEN inside the transaction by then). */
  const settleBriefly = (pending: Promise<unknown>): Promise<unknown> =>
    Promise.race([pending.catch(() => {}), new Promise((resolve) => setTimeout(resolve, 100))]);

  const listening = async (): Promise<string[]> => {
    const { rows } = await sql<{ channel: string }>`SELECT pg_listening_channels() AS channel`.execute(store.db);
    return rows.map((row) => row.channel).sort();
  };

  const notify = (channel: string, payload: string): Promise<unknown> =>
    sql`SELECT pg_notify(${channel}, ${payload})`.execute(store.db);

  const quietFor = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  it('a listen issued while a transaction is open survives that transaction rolling back', async () => {
    const received: string[] = [];
    const tx = await openTransaction();
    const subscribing = store.listen('lf_listen_rollback', (payload) => received.push(payload));
    await settleBriefly(subscribing);
    tx.rollBack();
    await expect(tx.done).rejects.toThrow('rolled back by the test');
    const unlisten = await subscribing;
    try {
      await sql`NOTIFY lf_listen_rollback, 'x'`.execute(store.db);
      await waitUntil('the notification', () => received.length > 0, 2_000);
      expect(received).toEqual(['x']);
      expect(await listening()).toContain('lf_listen_rollback');
    } finally {
      await unlisten();
    }
  });

  it('an unlisten issued while a transaction is open stays done when that transaction rolls back', async () => {
    const received: string[] = [];
    const unlisten = await store.listen('lf_unlisten_rollback', (payload) => received.push(payload));
    await notify('lf_unlisten_rollback', 'before');
    await waitUntil('the first notification', () => received.length > 0, 2_000);

    const tx = await openTransaction();
    const unsubscribing = unlisten();
    await settleBriefly(unsubscribing);
    tx.rollBack();
    await expect(tx.done).rejects.toThrow('rolled back by the test');
    await unsubscribing;

    // The session itself no longer listens (not just the callback being dropped in JavaScript).
    expect(await listening()).not.toContain('lf_unlisten_rollback');
    await notify('lf_unlisten_rollback', 'after');
    await quietFor(200);
    expect(received).toEqual(['before']);
  });

  it('listen and unlisten while no transaction is open', async () => {
    const received: string[] = [];
    const unlisten = await store.listen('lf_listen_idle', (payload) => received.push(payload));
    expect(await listening()).toContain('lf_listen_idle');
    await notify('lf_listen_idle', 'one');
    await notify('lf_listen_idle', 'two');
    await waitUntil('both notifications', () => received.length === 2, 2_000);
    expect(received).toEqual(['one', 'two']);

    await unlisten();
    await unlisten(); // a second call is harmless
    expect(await listening()).not.toContain('lf_listen_idle');
    await notify('lf_listen_idle', 'three');
    await quietFor(200);
    expect(received).toEqual(['one', 'two']);
  });

  it('two subscriptions to one channel: dropping one keeps the other', async () => {
    const first: string[] = [];
    const second: string[] = [];
    const unlistenFirst = await store.listen('lf_listen_shared', (payload) => first.push(payload));
    const unlistenSecond = await store.listen('lf_listen_shared', (payload) => second.push(payload));
    try {
      await unlistenFirst();
      expect(await listening()).toContain('lf_listen_shared');
      await notify('lf_listen_shared', 'x');
      await waitUntil('the second subscription to hear it', () => second.length > 0, 2_000);
      expect(second).toEqual(['x']);
      expect(first).toEqual([]);
    } finally {
      await unlistenSecond();
    }
    expect(await listening()).not.toContain('lf_listen_shared');
  });

  // Last: closes the file's store.
  it('close waits for an unlisten queued behind a transaction; unsubscribing after close is harmless', async () => {
    const queued = await store.listen('lf_listen_close', () => {});
    const kept = await store.listen('lf_listen_close_kept', () => {});
    const tx = await openTransaction();
    await queued(); // the UNLISTEN waits for the transaction
    const closing = store.close();
    closed = true;
    tx.rollBack();
    await expect(tx.done).rejects.toThrow('rolled back by the test');
    await closing;
    await expect(kept()).resolves.toBeUndefined();
  });
});
