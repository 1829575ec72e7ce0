import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { Kysely } from 'kysely';
import { INT8_OID, parseInt8, type Store } from '../store.js';
import type { LedgerflowDatabase } from '../tables.js';
import { lockDataDir } from './data-dir-lock.js';
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
  return {
    kind: 'pglite',
    db,
    location: `PGlite (embedded, fsync off) at ${options.dataDir ?? 'memory'}`,
    // The subscription lives as long as the embedded session, so `onLost` never fires.
    async listen(channel, onNotify) {
      let subscribed = true;
      const unlisten = await betweenTransactions(() =>
        pglite.listen(channel, (payload) => {
          if (subscribed) onNotify(payload);
        }),
      );
      return async () => {
        if (!subscribed) return;
        // Delivery stops now. The UNLISTEN is queued behind whoever holds the session rather than
        // awaited: a caller stopping (a worker, before it aborts its in-flight steps) must not
        // wait for a transaction it may be about to abort. `close()` drains the queue, so the
        // UNLISTEN still runs before PGlite closes, or is refused once the store is closed.
        subscribed = false;
        betweenTransactions(() => unlisten()).catch(() => {});
      };
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
