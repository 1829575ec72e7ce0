import type { Kysely } from 'kysely';
import type { LeasedRun } from '../../store/leased-run.js';
import type { LedgerflowDatabase } from '../../store/tables.js';

/*
 * A run's insert, when its start handed it over uninserted (client/deferred-start.ts): alone, just
 * before the run's first commit, unless that commit is a transactional step's (step-transaction.ts).
 */

/** What inserting a pending start needs of a step's execution. */
interface StartOf {
  readonly run: LeasedRun;
  readonly db: Kysely<LedgerflowDatabase>;
}

/**
 * A run a start of this process handed over uninserted (`PendingStart`, client/deferred-start.ts)
 * gets its row, as its own commit, before any commit but a transactional step's — which inserts
 * it first in its own transaction (step-transaction.ts): the start rides on that commit. (A plain
 * step's commit does not take it into a transaction of its own: BEGIN, insert, commit, COMMIT cost
 * more than the second durable commit they save — measured, DESIGN.md.)
 */
export async function insertStart(s: StartOf): Promise<void> {
  const pending = s.run.pendingStart;
  if (pending !== undefined && !pending.inserted) await pending.insertAlone(s.db);
}
