import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { Kysely } from 'kysely';
import { INT8_OID, parseInt8, type Store } from '../store.js';
import type { LedgerflowDatabase } from '../tables.js';
import { lockDataDir } from './data-dir-lock.js';
import { NotificationHub } from './notification-hub.js';
import { PGliteDialect } from './pglite-driver.js';

export interface PGliteStoreOptions {
  /** Directory of the embedded database; `undefined` keeps it in memory. */
  readonly dataDir?: string;
  /** Start from a data directory dump (a prepared template), e.g. in tests. */
  readonly loadDataDir?: Blob | File;
}

/** A PGlite store can also dump its data directory, e.g. to clone a prepared test database. */
export interface PGliteStore extends Store {
  readonly kind: 'pglite';
  /** Tarball of the data directory, loadable with `createPGliteStore({ loadDataDir })`. */
  dumpDataDir(): Promise<Blob | File>;
  /** Every LISTEN of the session, in-process and the dev server's clients' (see {@link NotificationHub}). */
  readonly notifications: NotificationHub;
  /**
   * Takes the one session for a wire-protocol client of the dev server: waits until no in-process
   * caller holds it (between their transactions, as Kysely's own connections take turns) and keeps
   * it until `release()`. Messages run through `exec` meanwhile.
   */
  acquireSession(): Promise<ExclusiveSession>;
}

/** The embedded session held by one wire-protocol client; see {@link PGliteStore.acquireSession}. */
export interface ExclusiveSession {
  /** Runs raw frontend protocol `message`; the backend's answer arrives through `onData`. */
  exec(message: Uint8Array, onData: (data: Uint8Array) => void): Promise<void>;
  release(): void;
}

/** The embedded default: PGlite (WASM PostgreSQL, fsync off), one process at a time. */
export async function createPGliteStore(options: PGliteStoreOptions = {}): Promise<PGliteStore> {
  let unlock: () => void = () => {};
  if (options.dataDir !== undefined) {
    mkdirSync(options.dataDir, { recursive: true });
    unlock = lockDataDir(options.dataDir);
  }
  let pglite: PGlite;
  try {
    pglite = await PGlite.create({
      ...(options.dataDir !== undefined ? { dataDir: options.dataDir } : {}),
      ...(options.loadDataDir !== undefined ? { loadDataDir: options.loadDataDir } : {}),
      parsers: { [INT8_OID]: parseInt8 },
    });
  } catch (error) {
    unlock();
    throw error;
  }
  const db = new Kysely<LedgerflowDatabase>({ dialect: new PGliteDialect(pglite) });
  // PGlite is one session, which the driver hands to one holder at a time. LISTEN and UNLISTEN
  // take their turn like any query: run straight on `pglite`, they could land inside another
  // caller's open transaction, and its rollback would undo them silently.
  const betweenTransactions = <T>(run: () => Promise<T>): Promise<T> => db.connection().execute(run);
  const notifications = new NotificationHub(pglite, betweenTransactions);
  return {
    kind: 'pglite',
    db,
    location: `PGlite (embedded, fsync off) at ${options.dataDir ?? 'memory'}`,
    // The subscription lives as long as the embedded session, so `onLost` never fires.
    async listen(channel, onNotify) {
      let subscribed = true;
      const unsubscribe = await notifications.subscribe(channel, (payload) => {
        if (subscribed) onNotify(payload);
      });
      return async () => {
        if (!subscribed) return;
        // Delivery stops now; the UNLISTEN (when nobody else listens) is queued, not awaited.
        subscribed = false;
        unsubscribe();
      };
    },
    notifications,
    acquireSession() {
      return new Promise<ExclusiveSession>((resolve, reject) => {
        // Holding a Kysely connection is holding the driver's turn: no in-process statement runs
        // until release. PGlite's own mutex is taken per message too, for anyone using PGlite itself.
        db.connection()
          .execute(
            () =>
              new Promise<void>((release) =>
                resolve({
                  exec: (message, onData) =>
                    pglite.runExclusive(() => pglite.execProtocolRawStream(message, { onRawData: onData })),
                  release: () => release(),
                }),
              ),
          )
          .catch(reject);
      });
    },
    dumpDataDir: () => pglite.dumpDataDir('none'),
    async close() {
      try {
        await db.destroy();
        await pglite.close();
      } finally {
        unlock();
      }
    },
  };
}
