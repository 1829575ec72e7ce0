import { describe, expect, it } from 'vitest';
import { poolerFromEnvironment } from '../../runtime/store/open-store.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';

/**
 * The `pooler` option of the pg store (PgBouncer in transaction mode), as far as it is decided
 * before a connection is made. What it does behind a real PgBouncer: tests/pgbouncer (`npm run
 * test:pgbouncer`).
 */
const url = 'postgres://app@127.0.0.1:1/shop';

describe('pooler option', () => {
  it('refuses a mode other than transaction, a listenUrl that is not a postgres URL, and unknown keys, saying what to write', () => {
    expect(() => createPgStore({ connectionString: url, pooler: { mode: 'session' as 'transaction' } })).toThrow(
      "pooler.mode must be 'transaction' (got session).",
    );
    expect(() =>
      createPgStore({ connectionString: url, pooler: { mode: 'transaction', listenUrl: 'db1:5432' } }),
    ).toThrow('pooler.listenUrl must be a postgres:// URL (got db1:5432).');
    expect(() =>
      createPgStore({ connectionString: url, pooler: { mode: 'transaction', listen: true } as never }),
    ).toThrow(
      `pooler must be { mode: 'transaction', listenUrl?: string } (got {"mode":"transaction","listen":true}; unknown: listen).`,
    );
    expect(() => createPgStore({ connectionString: url, pooler: 'transaction' as never })).toThrow(
      "pooler must be { mode: 'transaction', listenUrl?: string } (got transaction).",
    );
  });

  it('without a listenUrl: the store says it cannot listen, and listen() rejects saying why', async () => {
    const store = createPgStore({ connectionString: url, pooler: { mode: 'transaction' } });
    try {
      expect(store.location).toBe('PostgreSQL at 127.0.0.1:1/shop through a transaction pooler');
      expect(store.listenUnavailable).toBe(
        'the store reaches PostgreSQL through a transaction pooler and was given no pooler.listenUrl to LISTEN on: workers and waits poll instead',
      );
      await expect(store.listen('ledgerflow_runs', () => {})).rejects.toThrow(
        `cannot LISTEN on "ledgerflow_runs": ${store.listenUnavailable}`,
      );
    } finally {
      await store.close();
    }
  });

  it('pipelines by default, never behind a pooler, and not when told not to; refuses pipeline: true with a pooler', async () => {
    const stores = [
      createPgStore({ connectionString: url }),
      createPgStore({ connectionString: url, pipeline: false }),
      createPgStore({ connectionString: url, pooler: { mode: 'transaction' } }),
      createPgStore({ connectionString: url, pooler: { mode: 'transaction' }, pipeline: false }),
    ];
    try {
      expect(stores.map((s) => s.pipelines === true)).toEqual([true, false, false, false]);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    expect(() => createPgStore({ connectionString: url, pooler: { mode: 'transaction' }, pipeline: true })).toThrow(
      'pipeline cannot be true with a pooler: leave it unset (a pooled store does not pipeline).',
    );
    expect(() => createPgStore({ connectionString: url, pipeline: 'yes' as never })).toThrow(
      'pipeline must be true or false (got yes).',
    );
  });

  it('without the option, nothing changes: the store listens and says nothing of a pooler', async () => {
    const store = createPgStore({ connectionString: url });
    try {
      expect(store.location).toBe('PostgreSQL at 127.0.0.1:1/shop');
      expect('listenUnavailable' in store).toBe(false);
    } finally {
      await store.close();
    }
  });

  it('LEDGERFLOW_POOLER and LEDGERFLOW_LISTEN_URL give openStore its pooler, and a wrong one is refused', () => {
    expect(poolerFromEnvironment({})).toBeUndefined();
    expect(poolerFromEnvironment({ LEDGERFLOW_POOLER: 'transaction' })).toEqual({ mode: 'transaction' });
    expect(
      poolerFromEnvironment({ LEDGERFLOW_POOLER: 'transaction', LEDGERFLOW_LISTEN_URL: 'postgres://app@db:5432/shop' }),
    ).toEqual({
      mode: 'transaction',
      listenUrl: 'postgres://app@db:5432/shop',
    });
    expect(() => poolerFromEnvironment({ LEDGERFLOW_POOLER: 'session' })).toThrow(
      `LEDGERFLOW_POOLER must be 'transaction' (got "session")`,
    );
    expect(() => poolerFromEnvironment({ LEDGERFLOW_LISTEN_URL: 'postgres://app@db:5432/shop' })).toThrow(
      'LEDGERFLOW_LISTEN_URL is set without LEDGERFLOW_POOLER',
    );
  });
});
