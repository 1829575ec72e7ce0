import { SQLSTATE, sqlStateOf } from './sqlstate.js';

/*
 * What an error of either store's driver says about the connection. Here, beside the SQLSTATE
 * codes, because the worker and the client both ask it: the worker whether to retry a commit once
 * the database is back (never recording the error as the step's) and whether its start may go
 * on, the client's waits whether to read again.
 */

/**
 * True when an error from the database layer leaves a commit's outcome unknown: the connection
 * broke (class 08), the server shut down or restarted (57P0x), or the socket died before any
 * SQLSTATE arrived; or the host was not writable (25006), which a failover fixes. A statement
 * that failed with another SQLSTATE definitely did not commit.
 *
 * Also true when the server had no resources for the statement (class 53: out of connections
 * — 53300, at a reconnect — disk full, out of memory): the statement did not run, so the
 * outcome is known, but what it needs is the same — wait with backoff, re-read, commit again —
 * and never to be recorded as the step's own failure (that failure commit would meet the same
 * refusal, and the attempt would wait out its lease as a crash).
 */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const sqlState = sqlStateOf(error);
  // 25006: the host took the statement but cannot write (a standby, or a primary demoted under
  // us). The commit did not happen; like a broken connection it is retried once the store has
  // found the writable host (writable-host.ts drops such a connection).
  if (sqlState !== undefined) {
    return (
      sqlState.startsWith('08') ||
      sqlState.startsWith('57P') ||
      sqlState.startsWith('53') ||
      sqlState === SQLSTATE.READ_ONLY_SQL_TRANSACTION
    );
  }
  if (isSocketError(error)) return true;
  return /connection|terminat|socket|not queryable/i.test(error.message);
}

/** An error of the operating system's socket (ECONNRESET, ECONNREFUSED, EPIPE, ENOTFOUND …), not of the database. */
export function isSocketError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code);
}
