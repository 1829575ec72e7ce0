import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { LedgerflowDatabase, RunStatus } from '../store/tables.js';

/**
 * Open intents — external calls whose outcome nobody knows yet — oldest first, keyset-paged on
 * the partial index `step_effect_open_intent_age_idx` (core 0010), which holds only rows in
 * status `intent`: a page costs its own rows however large the ledger is.
 */
export interface OpenIntentRow {
  readonly run_id: string;
  readonly workflow_name: string;
  readonly workflow_version: number;
  readonly run_status: RunStatus;
  readonly step_name: string;
  readonly idempotency_key: string;
  readonly attempt: number;
  readonly intent_at: Date;
  /** The intent's horizon: before it, the call may still be in flight. */
  readonly reconcile_after: Date | null;
  readonly reconcile_attempts: number;
  /** The database's clock when the page was read, to say "due" or "in 3 min" without the browser's clock. */
  readonly now: Date;
  /** intent_at to the microsecond, for the cursor. */
  readonly intent_key: string;
}

export interface OpenIntentCursor {
  readonly intentAt: string;
  readonly runId: string;
  readonly stepName: string;
  readonly key: string;
}

export function openIntentsQuery(cursor: OpenIntentCursor | undefined, limit: number): RawBuilder<OpenIntentRow> {
  const after =
    cursor === undefined
      ? sql``
      : sql`AND (e.intent_at, e.workflow_id, e.step_name, e.idempotency_key) > (${cursor.intentAt}::timestamptz, ${cursor.runId}::uuid, ${cursor.stepName}, ${cursor.key})`;
  return sql<OpenIntentRow>`
    SELECT e.workflow_id AS run_id, r.workflow_name, r.workflow_version, r.status AS run_status, e.step_name, e.idempotency_key,
           e.attempt, e.intent_at, e.reconcile_after, e.reconcile_attempts, statement_timestamp() AS now,
           to_char(e.intent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS intent_key
      FROM ledgerflow.step_effect e
      JOIN ledgerflow.workflow_run r ON r.id = e.workflow_id
     WHERE e.status = 'intent' ${after}
     ORDER BY e.intent_at, e.workflow_id, e.step_name, e.idempotency_key
     LIMIT ${limit + 1}`;
}

export async function loadOpenIntents(
  db: Kysely<LedgerflowDatabase>,
  cursor: OpenIntentCursor | undefined,
  limit: number,
): Promise<{ rows: readonly OpenIntentRow[]; next: OpenIntentCursor | undefined }> {
  const { rows } = await openIntentsQuery(cursor, limit).execute(db);
  const shown = rows.slice(0, limit);
  const last = shown.at(-1);
  return {
    rows: shown,
    next:
      rows.length > limit && last !== undefined
        ? { intentAt: last.intent_key, runId: last.run_id, stepName: last.step_name, key: last.idempotency_key }
        : undefined,
  };
}
