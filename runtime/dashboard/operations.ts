import type { QueueSummary } from '../client/queues.js';
import type { ScheduleSummary } from '../client/schedules.js';

/** Who did an operator action and why: written to the audit trail with it. */
export interface OperatorNote {
  readonly actor: string;
  readonly reason: string;
}

export type EffectResolution = { readonly found: unknown } | { readonly notFound: true };

/** One row of the operator actions trail, as the dashboard shows it. */
export interface AuditEntry {
  readonly at: Date;
  readonly actor: string;
  readonly action: string;
  /** What it acted on: a run id, a queue or schedule name. */
  readonly target: string;
  readonly runId: string | null;
  readonly reason: string;
  /** What the action did or found (its result, the run's status before it), as stored. */
  readonly detail: unknown;
}

/**
 * What the dashboard asks of ledgerflow to act. Each action writes its change and an audit row
 * (actor, reason) in one transaction; the dashboard only checks the request (CSRF, a reason) and
 * shows the outcome. {@link clientOperations} provides it from a client.
 */
export interface DashboardOperations {
  cancel(runId: string, note: OperatorNote): Promise<boolean>;
  retryRun(runId: string, note: OperatorNote): Promise<{ readonly runId: string; readonly fromStep: string; readonly previousStatus: string }>;
  resolveEffect(
    runId: string,
    stepName: string,
    resolution: EffectResolution,
    note: OperatorNote,
  ): Promise<{ readonly idempotencyKey: string; readonly status: 'recorded' | 'released'; readonly runStatus: string }>;
  pauseQueue(name: string, note: OperatorNote): Promise<boolean>;
  resumeQueue(name: string, note: OperatorNote): Promise<boolean>;
  pauseSchedule(name: string, note: OperatorNote): Promise<boolean>;
  resumeSchedule(name: string, note: OperatorNote): Promise<boolean>;
  listQueues(): Promise<readonly (QueueSummary & { readonly paused?: boolean })[]>;
  listSchedules(): Promise<readonly ScheduleSummary[]>;
  listAudit(filter: { readonly runId?: string; readonly limit?: number }): Promise<readonly AuditEntry[]>;
}
