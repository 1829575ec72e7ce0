import { sql, type Kysely } from 'kysely';
import type { LeasedRun } from '../../store/leased-run.js';
import type { LedgerflowDatabase } from '../../store/tables.js';

/*
 * A run's insert, when its start handed it over uninserted (client/deferred-start.ts): made with
 * the run's first commit where that commit can take it, alone just before it where not.
 */

/** What inserting a pending start needs of a step's execution. */
interface StartOf {
  readonly run: LeasedRun;
  readonly db: Kysely<LedgerflowDatabase>;
}

/**
 * A run a start of this process handed over uninserted (`PendingStart`, client/deferred-start.ts)
 * gets its row, as its own commit, before a commit that cannot take it: a transactional step's
 * inserts it first in its own transaction (step-transaction.ts), a plain step's, a skip's and a
 * carry's flush in theirs ({@link withStart}).
 */
export async function insertStart(s: StartOf): Promise<void> {
  const pending = s.run.pendingStart;
  if (pending !== undefined && !pending.inserted) await pending.insertAlone(s.db);
}

/**
 * A commit that may carry the run's start: for a run its start handed over uninserted, the insert
 * and `commit` in one transaction — one durable commit for both, where {@link insertStart} would
 * make two (a one-step workflow costs one commit). `commit` is given the transaction; otherwise
 * it is given nothing and commits as it would (in a group, commit-queue.ts). The insert is taken
 * before the connection, as a transactional step's is (step-transaction.ts). An outcome the
 * connection hides leaves the start pending: the commit's own check (commitKnowingOutcome)
 * finds what became of it, and an insert that follows finds this run's row if it committed.
 */
export async function withStart<T>(
  s: StartOf,
  commit: (trx: Kysely<LedgerflowDatabase> | undefined) => Promise<T>,
): Promise<T> {
  const pending = s.run.pendingStart;
  if (pending === undefined || pending.inserted || !(await pending.takeForTransaction())) return commit(undefined);
  let committed = false;
  try {
    // BEGIN and COMMIT as statements, as a step's transaction sends them (seen by a store's plugins).
    return await s.db.connection().execute(async (conn) => {
      await sql`BEGIN`.execute(conn);
      try {
        await pending.insertWithin(conn);
        const result = await commit(conn);
        await sql`COMMIT`.execute(conn);
        committed = true;
        return result;
      } finally {
        if (!committed) await sql`ROLLBACK`.execute(conn).catch(() => undefined);
      }
    });
  } finally {
    pending.transactionEnded(committed);
  }
}
