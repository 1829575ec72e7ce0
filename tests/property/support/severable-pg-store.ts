import pg from 'pg';
import { createPgStore } from '../../../runtime/store/pg/pg-store.js';
import type { Store } from '../../../runtime/store/store.js';

/** A store whose process can be made to "die" as far as the database can tell. */
export interface SeverableStore extends Store {
  /**
   * From now on every query and connection attempt fails, and the server ends this store's
   * sessions (open transactions roll back) — what a SIGKILLed worker looks like to PostgreSQL,
   * while the test process itself lives on. Code still running in the "dead" worker (a perform
   * in flight, a hung fault point) can no longer reach the database.
   */
  sever(): Promise<void>;
}

class SeveredError extends Error {
  override readonly name = 'SeveredError';
  constructor() {
    super('connection severed: this worker is treated as crashed');
  }
}

/** The runtime's `pg` store, whose sessions carry `applicationName` so that they can be ended. */
export function createSeverablePgStore(options: {
  readonly connectionString: string;
  readonly adminUrl: string;
  readonly applicationName: string;
  readonly maxConnections: number;
}): SeverableStore {
  let severed = false;
  class SeverableClient extends pg.Client {}
  const originalConnect = pg.Client.prototype.connect;
  const originalQuery = pg.Client.prototype.query;
  SeverableClient.prototype.connect = function connect(this: pg.Client, ...args: unknown[]) {
    if (severed) {
      const callback = args[0];
      if (typeof callback === 'function') {
        queueMicrotask(() => (callback as (error: Error) => void)(new SeveredError()));
        return undefined;
      }
      return Promise.reject(new SeveredError());
    }
    return (originalConnect as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof originalConnect;
  SeverableClient.prototype.query = function query(this: pg.Client, ...args: unknown[]) {
    if (severed) return Promise.reject(new SeveredError());
    return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof originalQuery;

  const store = createPgStore({
    connectionString: options.connectionString,
    maxConnections: options.maxConnections,
    applicationName: options.applicationName,
    clientClass: SeverableClient,
  });
  return {
    ...store,
    location: `${store.location} (severable, ${options.applicationName})`,
    async sever() {
      severed = true;
      const admin = new pg.Client({ connectionString: options.adminUrl });
      await admin.connect();
      try {
        await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [
          options.applicationName,
        ]);
      } finally {
        await admin.end();
      }
    },
    async close() {
      // A severed pool may hold clients that are never released (their code hangs): do not wait for them.
      if (severed) {
        void store.close().catch(() => {});
        return;
      }
      await store.close();
    },
  };
}
