import type { FinalRunStatus } from '../store/tables.js';

/*
 * What the archive keeps of a pruned run, as data: what a start that meets it returns and what
 * `RunPrunedError` carries. Data only, so that errors.ts can import it; the reads that build the
 * errors are in missing-run-error.ts.
 */

/** What is left of a pruned run (run_archive, core 0008): its identity and how it ended. */
export interface PrunedRun {
  readonly id: string;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly dedupeKey: string | null;
  readonly status: FinalRunStatus;
  readonly createdAt: Date;
  readonly finishedAt: Date;
  readonly prunedAt: Date;
}

/** The archive's columns {@link toPrunedRun} reads: every read of a pruned run selects these. */
export const PRUNED_RUN_COLUMNS = [
  'id',
  'workflow_name',
  'workflow_version',
  'dedupe_key',
  'status',
  'created_at',
  'finished_at',
  'pruned_at',
] as const;

export function toPrunedRun(row: {
  readonly id: string;
  readonly workflow_name: string;
  readonly workflow_version: number;
  readonly dedupe_key: string | null;
  readonly status: FinalRunStatus;
  readonly created_at: Date;
  readonly finished_at: Date;
  readonly pruned_at: Date;
}): PrunedRun {
  return {
    id: row.id,
    workflowName: row.workflow_name,
    workflowVersion: row.workflow_version,
    dedupeKey: row.dedupe_key,
    status: row.status,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
    prunedAt: row.pruned_at,
  };
}
