import { sql, type Kysely } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';

/** One migrated workflow version and what its runs are doing. */
export interface WorkflowVersionSummary {
  readonly workflowName: string;
  readonly version: number;
  readonly definitionHash: string;
  readonly migratedAt: Date;
  readonly pending: number;
  readonly running: number;
  /** Sleeping, waiting for an event or for children: they need the handlers when they wake. */
  readonly waiting: number;
  readonly needsReconciliation: number;
  /** pending + running + waiting + needs_reconciliation: runs that still need this version's handlers. */
  readonly unfinished: number;
  readonly completed: number;
  readonly failed: number;
  readonly cancelled: number;
}

/**
 * Every migrated workflow version with its runs counted by status, by name then version. A
 * version with unfinished runs must stay served by some worker (its handlers registered) until
 * they finish: retiring it earlier strands them.
 */
export async function listWorkflowVersions(db: Kysely<LedgerflowDatabase>): Promise<WorkflowVersionSummary[]> {
  const { rows } = await sql<{
    workflow_name: string;
    version: number;
    definition_hash: string;
    created_at: Date;
    pending: number;
    running: number;
    waiting: number;
    needs_reconciliation: number;
    completed: number;
    failed: number;
    cancelled: number;
  }>`
    SELECT v.workflow_name, v.version, v.definition_hash, v.created_at,
           count(r.id) FILTER (WHERE r.status = 'pending')::int AS pending,
           count(r.id) FILTER (WHERE r.status = 'running')::int AS running,
           count(r.id) FILTER (WHERE r.status = 'waiting')::int AS waiting,
           count(r.id) FILTER (WHERE r.status = 'needs_reconciliation')::int AS needs_reconciliation,
           count(r.id) FILTER (WHERE r.status = 'completed')::int AS completed,
           count(r.id) FILTER (WHERE r.status = 'failed')::int AS failed,
           count(r.id) FILTER (WHERE r.status = 'cancelled')::int AS cancelled
      FROM ledgerflow.workflow_version v
      LEFT JOIN ledgerflow.workflow_run r ON r.workflow_name = v.workflow_name AND r.workflow_version = v.version
     GROUP BY v.workflow_name, v.version, v.definition_hash, v.created_at
     ORDER BY v.workflow_name, v.version`.execute(db);
  return rows.map((r) => ({
    workflowName: r.workflow_name,
    version: r.version,
    definitionHash: r.definition_hash,
    migratedAt: r.created_at,
    pending: r.pending,
    running: r.running,
    waiting: r.waiting,
    needsReconciliation: r.needs_reconciliation,
    unfinished: r.pending + r.running + r.waiting + r.needs_reconciliation,
    completed: r.completed,
    failed: r.failed,
    cancelled: r.cancelled,
  }));
}

/**
 * Versions of the given workflow names that have unfinished runs but are not among `served`:
 * a worker that starts without them leaves those runs waiting forever.
 */
export async function strandedVersions(
  db: Kysely<LedgerflowDatabase>,
  served: ReadonlyArray<{ readonly name: string; readonly version: number }>,
): Promise<WorkflowVersionSummary[]> {
  const names = new Set(served.map((w) => w.name));
  const servedIds = new Set(served.map((w) => `${w.name}@${w.version}`));
  return (await listWorkflowVersions(db)).filter(
    (v) => names.has(v.workflowName) && !servedIds.has(`${v.workflowName}@${v.version}`) && v.unfinished > 0,
  );
}

/** `refund v1 (3 unfinished: 2 pending, 1 needs_reconciliation)`. */
export function describeUnfinished(v: WorkflowVersionSummary): string {
  const parts = [
    v.pending > 0 ? `${v.pending} pending` : '',
    v.running > 0 ? `${v.running} running` : '',
    v.waiting > 0 ? `${v.waiting} waiting` : '',
    v.needsReconciliation > 0 ? `${v.needsReconciliation} needs_reconciliation` : '',
  ].filter((p) => p !== '');
  return `${v.workflowName} v${v.version} (${v.unfinished} unfinished: ${parts.join(', ')})`;
}
