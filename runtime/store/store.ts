import type { Kysely } from 'kysely';
import type { LedgerflowDatabase } from './tables.js';

export type StoreKind = 'pg' | 'pglite';

/**
 * One database behind Kysely. The two implementations (`pg/`, `pglite/`) differ only in how
 * they connect, listen and describe themselves; every query is shared code.
 */
export interface Store {
  readonly kind: StoreKind;
  readonly db: Kysely<LedgerflowDatabase>;
  /** Where the data lives, for humans ("PostgreSQL at host:5432/db", "PGlite (fsync off) at .ledgerflow/db"). */
  readonly location: string;
  /**
   * Subscribes to NOTIFY on `channel`; resolves to an unsubscribe function. `onLost` is called
   * at most once if the subscription's connection breaks (backend terminated, server restarted):
   * no notification arrives after that, and the caller subscribes again.
   */
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onLost?: (error: Error) => void,
    options?: ListenOptions,
  ): Promise<() => Promise<void>>;
  /**
   * Set (to the reason, in words) when this store cannot LISTEN: a PostgreSQL store behind a
   * transaction pooler given no URL to listen on (`pooler` without `listenUrl`). `listen` then
   * rejects; the worker does not subscribe (its claim poll finds new runs) and `waitForRun`
   * polls the run's status.
   */
  readonly listenUnavailable?: string;
  /**
   * Ends another session of this database at once (`pg_terminate_backend`), rolling back its
   * transaction and releasing its locks: how a transactional step whose statement is stuck is
   * ended when its lease is lost. Absent on PGlite, whose one connection cannot block on another.
   */
  readonly terminateBackend?: (pid: number) => Promise<void>;
  /**
   * Every connection of `db` is a node-postgres client in pipeline mode: statements sent on one
   * connection without waiting for the previous answer go out together and are answered in order
   * (a transactional step's transaction sends its opening statements, and its commit with COMMIT,
   * that way). Absent on PGlite and behind a transaction pooler.
   */
  readonly pipelines?: true;
  close(): Promise<void>;
}

export interface ListenOptions {
  /**
   * `false`: the subscription alone does not keep the Node.js process alive (its socket is
   * unref'd), for a subscription kept open between uses, such as the client's for `waitForRun`,
   * whose waiters hold timers of their own. Default `true`.
   */
  readonly keepProcessAlive?: boolean;
}

/** Postgres type OIDs whose text form both drivers must parse the same way. */
export const INT8_OID = 20;

/** Fencing tokens, counts and attempt numbers fit comfortably in a double. */
export function parseInt8(value: string): number {
  const parsed = Number(value);
  if (!Number.isSafeInteger(parsed)) {
    throw new RangeError(`int8 value ${value} does not fit a JavaScript number`);
  }
  return parsed;
}
