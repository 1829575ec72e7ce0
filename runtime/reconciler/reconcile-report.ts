/*
 * What a reconcile pass reports. Apart from the pass (reconciler.ts) because a worker's events
 * carry the report (worker/worker-events.ts) and telemetry reads those events, while the pass
 * itself records telemetry: the events must not depend on the pass.
 */

export type ReconcileItemOutcome = 'recorded' | 'released' | 'parked' | 'deferred' | 'skipped' | 'error';

export interface ReconcileItem {
  readonly runId: string;
  readonly workflow: string;
  readonly step: string;
  readonly key: string;
  /** The attempt that wrote the intent. */
  readonly intentAttempt: number;
  readonly outcome: ReconcileItemOutcome;
  readonly detail: string;
}

export interface ReconcileReport {
  /** Due intents this pass claimed and asked about. */
  readonly examined: number;
  /** found at the provider and recorded */
  readonly recorded: number;
  /** not found: released (for a same-key retry, or settled on a finished run) */
  readonly released: number;
  readonly parked: number;
  /** inconclusive: asked again after a backoff */
  readonly deferred: number;
  readonly skipped: number;
  /** the database failed while settling the item; it is due again after the hold */
  readonly errors: number;
  readonly items: readonly ReconcileItem[];
}
