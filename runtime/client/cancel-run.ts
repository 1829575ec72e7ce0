import { sql, type Kysely } from 'kysely';
import type { LedgerflowDatabase, RunStatus } from '../store/tables.js';
import { assertRunTransition } from '../worker/state-machines.js';

/** The statuses `cancel` takes a run from: every one with a transition into `cancelled` (state-machines.ts). */
const CANCELLABLE: readonly RunStatus[] = ['pending', 'running', 'waiting', 'needs_reconciliation'];

/**
 * The statement of {@link Client.cancel}: the run `cancelled` if it is not final yet, its lease
 * cleared, its wait ended and its fencing token moved on. The `run_settled` trigger (core 0003)
 * closes its running attempt as `abandoned` and cancels its unfinished children.
 */
export function cancelRunStatement(db: Kysely<LedgerflowDatabase>, runId: string) {
  for (const from of CANCELLABLE) assertRunTransition(from, 'cancelled');
  return db
    .updateTable('ledgerflow.workflow_run')
    .set({
      status: 'cancelled',
      finished_at: sql<Date>`statement_timestamp()`,
      updated_at: sql<Date>`statement_timestamp()`,
      lease_owner: null,
      lease_expires_at: null,
      waiting_for: null,
      fencing_token: sql<number>`fencing_token + 1`,
    })
    .where('id', '=', runId)
    .where('status', 'in', CANCELLABLE)
    .returning('id');
}
