import type { Kysely } from 'kysely';
import type { LedgerflowDatabase, OperatorActionRow } from '../../store/tables.js';
import { assertRunId } from '../validate-input.js';

export interface AuditFilter {
  /** Only the actions on this run. */
  readonly runId?: string;
  /** Newest first; default 50, at most 10 000. */
  readonly limit?: number;
}

/** {@link Client.listAudit}: newest first. */
export async function listAudit(
  db: Kysely<LedgerflowDatabase>,
  filter: AuditFilter,
  limit: number,
): Promise<OperatorActionRow[]> {
  let query = db.selectFrom('ledgerflow.operator_action').selectAll();
  if (filter.runId !== undefined) {
    assertRunId(filter.runId);
    query = query.where('run_id', '=', filter.runId);
  }
  return query.orderBy('id', 'desc').limit(limit).execute();
}
