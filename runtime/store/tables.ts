import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { StepKind } from '../../dsl/step-kind.js';

/**
 * Kysely types for the core schema that ledgerflow's core migrations (`runtime/migrate/core/*.sql`)
 * create, hand-written: a core migration that adds, drops or changes a column changes these too
 * (tests/runtime/schema.test.ts compares them with the migrated database). Keys are
 * schema-qualified so every query names its schema.
 *
 * Long because it is one interface per table of the core schema, together as `LedgerflowDatabase`
 * names them and as the schema test compares them.
 */
export type RunStatus =
  | 'pending'
  | 'running'
  | 'waiting'
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'needs_reconciliation'
  | 'compensated'
  | 'compensation_failed';
/** Every run status, in life-cycle order (for validating filters and listing choices). */
export const RUN_STATUSES: readonly RunStatus[] = [
  'pending',
  'running',
  'waiting',
  'completed',
  'failed',
  'cancelled',
  'needs_reconciliation',
  'compensated',
  'compensation_failed',
];
export type FinalRunStatus = Extract<
  RunStatus,
  'completed' | 'failed' | 'cancelled' | 'compensated' | 'compensation_failed'
>;
/** The statuses a run ends in, so may be pruned in (compensated and compensation_failed: core 0013, pruned since 0015). The other run-status sets: store/state-machines.ts. */
export const FINAL_RUN_STATUSES: readonly FinalRunStatus[] = [
  'completed',
  'failed',
  'cancelled',
  'compensated',
  'compensation_failed',
];
/** Why a run is being (or was) compensated (core 0013): it failed for good, or a cancel asked for it. */
export type CompensationReason = 'failure' | 'cancel';
export type AttemptStatus = 'running' | 'succeeded' | 'failed' | 'abandoned' | 'suspended';
export type EffectStatus = 'intent' | 'recorded' | 'released';
export type EffectKind = Exclude<StepKind, 'step'>;

/** JSON as stored in jsonb columns. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type DbNow = ColumnType<Date, Date | string | undefined, Date | string>;

export interface WorkflowVersionTable {
  workflow_name: string;
  version: number;
  definition_hash: string;
  created_at: DbNow;
  /** `cancel(runId)` without `compensate` compensates runs of this version (core 0013). */
  compensate_on_cancel: Generated<boolean>;
  /** A draft version (core 0020): the name of the migration that registered it, which `migrate` may replace while it has no runs; NULL once released. */
  draft_migration: string | null;
}

/** The definition a workflow version was first served with (core 0020): its fingerprint, per part. */
export interface WorkflowFingerprintTable {
  workflow_name: string;
  version: number;
  fingerprint: string;
  parts: ColumnType<Record<string, string>, string, string>;
  registered_by: string;
  registered_at: DbNow;
}

export interface WorkflowStepDefTable {
  workflow_name: string;
  version: number;
  step_name: string;
  position: number;
  kind: StepKind;
  idempotent_by_key: Generated<boolean>;
  /** A compensation (core 0013): the step whose effect it undoes; NULL for the workflow's own steps. */
  compensates: string | null;
}

export interface WorkflowRunTable {
  id: string;
  workflow_name: string;
  workflow_version: number;
  status: Generated<RunStatus>;
  input: Json;
  dedupe_key: string | null;
  /** The key of a debounced start (`start(…, { debounce })`), kept after its window closes. */
  debounce_key: string | null;
  /**
   * False once a later start found the run's debounce window over before a worker claimed it.
   * The window is open only while this is true, the run is pending, never claimed
   * (`fencing_token = 0`) and not due yet (core migration 0006).
   */
  debounce_open: Generated<boolean>;
  current_step: Generated<number>;
  output: Json | null;
  error: Json | null;
  run_after: DbNow;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  fencing_token: Generated<number>;
  created_at: DbNow;
  updated_at: DbNow;
  finished_at: Date | null;
  /** A child run: the run that started it, from which step, for which item. */
  parent_run_id: string | null;
  parent_step: string | null;
  parent_index: number | null;
  /** The run is cancelled if it is still unfinished at this time. */
  deadline_at: Date | null;
  /** What a `waiting` run waits for (see {@link WaitingFor}); null otherwise. */
  waiting_for: Json | null;
  /** Children not finished yet, and children that failed or were cancelled (kept by a trigger). */
  children_open: Generated<number>;
  children_failed: Generated<number>;
  /** Order among the waiters of a queue partition: higher first. */
  priority: Generated<number>;
  /**
   * An operator's retry gives the step it resumes at a fresh attempt budget: attempts of
   * `budget_step` numbered up to `budget_base` count toward neither maxAttempts nor the crash
   * limit (core migration 0007).
   */
  budget_step: string | null;
  budget_base: Generated<number>;
  /**
   * The OpenTelemetry context active where the run was started, as its propagator's carrier
   * (`traceparent`, `tracestate`); the worker's spans for the run continue it (core 0009).
   */
  trace_context: Json | null;
  /**
   * Somebody waits for the run's end (`waitForRun`, `startAndWait`): the transaction that settles
   * it NOTIFYs `ledgerflow_run_settled` with its id (a trigger, core 0011). Unwatched runs never notify.
   */
  notify_settled: Generated<boolean>;
  /**
   * Why the run is undoing its recorded effects (core 0013): `failure` or `cancel`; NULL while it
   * is not. A run being compensated is pending/running/… positioned at a compensation, and ends
   * `compensated` or `compensation_failed`.
   */
  compensation: CompensationReason | null;
}

/** `workflow_run.waiting_for` of a waiting run. */
export type WaitingFor =
  | { readonly kind: 'sleep'; readonly step: string; readonly until: string }
  | {
      readonly kind: 'event';
      readonly step: string;
      readonly event: string;
      readonly key: string;
      readonly until: string | null;
    }
  | {
      readonly kind: 'children';
      readonly step: string;
      readonly open: number;
      readonly total: number;
      readonly wakeBelow: number;
    }
  /** A slot of a queue; `step` is '' when the whole run needs it (a workflow-level queue). */
  | {
      readonly kind: 'queue';
      readonly step: string;
      readonly queue: string;
      readonly partition: string;
      readonly until: string | null;
    };

export interface StepAttemptTable {
  run_id: string;
  step_name: string;
  attempt: number;
  status: AttemptStatus;
  fencing_token: number;
  worker_id: string;
  error: Json | null;
  started_at: DbNow;
  finished_at: Timestamp | null;
  next_eligible_at: Timestamp | null;
}

export interface StepEffectTable {
  workflow_id: string;
  step_name: string;
  idempotency_key: string;
  effect: Json;
  created_at: DbNow;
  status: EffectStatus;
  kind: EffectKind;
  request_hash: string;
  attempt: number;
  fencing_token: number;
  intent_at: DbNow;
  recorded_at: Timestamp | null;
  resolution: string | null;
  /** When an open intent may be reconciled (asked about) next; null unless `intent`. */
  reconcile_after: Timestamp | null;
  /** How many times the provider was asked about this intent. */
  reconcile_attempts: Generated<number>;
}

export interface StepResultTable {
  run_id: string;
  workflow_name: string;
  workflow_version: number;
  step_name: string;
  kind: StepKind;
  /** NULL when the step was skipped by its condition. */
  output: Json | null;
  attempt: number;
  idempotency_key: string | null;
  effect_status: 'recorded' | null;
  created_at: DbNow;
  skipped: Generated<boolean>;
}

export interface StepWaitTable {
  run_id: string;
  step_name: string;
  kind: 'sleep' | 'event' | 'children';
  /** Wake-up time (sleep) or timeout (event); fixed when the run first reached the step. */
  until: Date | null;
  event_name: string | null;
  correlation_key: string | null;
  created_at: DbNow;
  resolved_at: Timestamp | null;
}

export interface EventTable {
  id: string;
  name: string;
  correlation_key: string;
  payload: Json;
  dedupe_key: string | null;
  created_at: DbNow;
  consumed_by_run: string | null;
  consumed_by_step: string | null;
  consumed_at: Timestamp | null;
}

/** A registered schedule (core 0005): one run of its workflow per tick of its cron. */
export interface ScheduleTable {
  name: string;
  cron: string;
  /** IANA time zone the cron is read in. */
  timezone: string;
  workflow_name: string;
  workflow_version: number;
  catch_up: 'skip' | 'latest' | 'all';
  /** `all` only: at most this many missed ticks start a run. */
  catch_up_max: number | null;
  /** Hash of the registered definition; only a worker whose code has the same one ticks it. */
  definition_hash: string;
  paused: Generated<boolean>;
  /** The first tick not processed yet. */
  next_tick_at: Date;
  /** The latest tick that started a run, and that run. */
  last_tick_at: Timestamp | null;
  last_run_id: string | null;
  /** Why the last attempt to start a tick's run failed; cleared by the next success. */
  last_error: Json | null;
  failures: Generated<number>;
  /** After a failure: not tried again before this time. */
  retry_at: Timestamp | null;
  created_at: DbNow;
  registered_at: DbNow;
}

export interface SchemaMigrationTable {
  name: string;
  checksum: string;
  applied_at: DbNow;
}

export interface QueueTable {
  name: string;
  concurrency: number | null;
  rate_limit: number | null;
  rate_period_ms: number | null;
  partition_concurrency: number | null;
  partition_rate_limit: number | null;
  partition_rate_period_ms: number | null;
  updated_at: DbNow;
  /** A paused queue grants no slot until it is resumed (core migration 0004; set by operators, core 0007 audits it). */
  paused: Generated<boolean>;
}

/** Counters per (queue, partition); partition '' is the queue as a whole. */
export interface QueuePartitionTable {
  queue: string;
  partition: string;
  in_flight: Generated<number>;
  waiting: Generated<number>;
  top_priority: number | null;
  last_granted_at: Timestamp | null;
  /** (the queue's row) When the last grant stopped at a rate limit: when its window admits the next. */
  next_token_at: Timestamp | null;
}

/** Recent grants, for the sliding-window rate limits (partition '' for the queue's own limit). */
export interface QueueGrantTable {
  queue: string;
  partition: string;
  granted_at: Date;
}

export interface QueueSlotTable {
  queue: string;
  partition: string;
  run_id: string;
  /** '' for a slot the whole run holds. */
  step_name: string;
  granted_at: DbNow;
  /** When its run's ask took it up (core 0021): dated in the rate windows from then; NULL while granted to a run not back yet. */
  used_at: Date | null;
  /** Its number in 1..concurrency (core 0022): two slots never share one, which keeps the count exact without a lock. */
  n: number | null;
  /** Counted in queue_partition.in_flight; false for a slot taken on the fast path until an ask that goes to the line counts it. */
  counted: Generated<boolean>;
}

export interface QueueWaiterTable {
  queue: string;
  partition: string;
  run_id: string;
  step_name: string;
  priority: Generated<number>;
  enqueued_at: DbNow;
}

export type OperatorActionKind =
  | 'cancel'
  | 'retry'
  | 'resolve-found'
  | 'resolve-not-found'
  | 'pause-queue'
  | 'resume-queue'
  | 'pause-schedule'
  | 'resume-schedule';

/** The audit trail of operator actions (core migration 0007), written by each action's own transaction. */
export interface OperatorActionTable {
  id: Generated<number>;
  at: DbNow;
  actor: string;
  action: OperatorActionKind;
  run_id: string | null;
  /** The effect's idempotency key, the queue or the schedule acted on. */
  target: string | null;
  reason: string;
  detail: Generated<Json>;
}

/** A pruned run's tombstone (core 0008): what keeps its id and dedupe key from starting a new run. */
export interface RunArchiveTable {
  id: string;
  workflow_name: string;
  workflow_version: number;
  dedupe_key: string | null;
  /** sha256 (hex) of the input's jsonb text: a start with another input is refused as before. */
  input_hash: string;
  /** Compensated and compensation_failed since core 0015. */
  status: FinalRunStatus;
  parent_run_id: string | null;
  created_at: Date;
  finished_at: Date;
  pruned_at: DbNow;
}

/** A pruned event's tombstone (core 0016), kept when it had a dedupe key: a send with that key stores nothing. */
export interface EventArchiveTable {
  name: string;
  dedupe_key: string;
  id: string;
  correlation_key: string;
  /** sha256 (hex) of the payload's jsonb text: a send with another payload is refused as before. */
  payload_hash: string;
  created_at: Date;
  consumed_by_run: string | null;
  consumed_by_step: string | null;
  consumed_at: Date | null;
  pruned_at: DbNow;
}

/** A pruned run's recorded ledger row (core 0008): which effect happened under which key. */
export interface EffectArchiveTable {
  run_id: string;
  step_name: string;
  idempotency_key: string;
  kind: EffectKind;
  effect: Json;
  request_hash: string;
  resolution: string | null;
  recorded_at: Date;
}

/**
 * A role whose members may delete recorded history — the retention path (core 0012). Written by
 * the schema's owner only (`ledgerflow grants --retention`); read by the immutability triggers.
 */
export interface RetentionRoleTable {
  role_name: string;
  added_at: DbNow;
}

/**
 * The one row of size limits (core 0014; `ledgerflow limits`): bytes of JSON text a run input,
 * step output, event payload may have (refused above), and an error record (truncated above).
 */
export interface PayloadLimitsTable {
  id: Generated<boolean>;
  max_input_bytes: Generated<number>;
  max_output_bytes: Generated<number>;
  max_event_payload_bytes: Generated<number>;
  max_error_bytes: Generated<number>;
  updated_at: DbNow;
}

export interface LedgerflowDatabase {
  'ledgerflow.workflow_version': WorkflowVersionTable;
  'ledgerflow.workflow_fingerprint': WorkflowFingerprintTable;
  'ledgerflow.workflow_step_def': WorkflowStepDefTable;
  'ledgerflow.workflow_run': WorkflowRunTable;
  'ledgerflow.step_attempt': StepAttemptTable;
  'ledgerflow.step_effect': StepEffectTable;
  'ledgerflow.step_result': StepResultTable;
  'ledgerflow.schema_migration': SchemaMigrationTable;
  'ledgerflow.step_wait': StepWaitTable;
  'ledgerflow.event': EventTable;
  'ledgerflow.schedule': ScheduleTable;
  'ledgerflow.queue': QueueTable;
  'ledgerflow.queue_partition': QueuePartitionTable;
  'ledgerflow.queue_grant': QueueGrantTable;
  'ledgerflow.queue_slot': QueueSlotTable;
  'ledgerflow.queue_waiter': QueueWaiterTable;
  'ledgerflow.operator_action': OperatorActionTable;
  'ledgerflow.run_archive': RunArchiveTable;
  'ledgerflow.effect_archive': EffectArchiveTable;
  'ledgerflow.event_archive': EventArchiveTable;
  'ledgerflow.retention_role': RetentionRoleTable;
  'ledgerflow.payload_limits': PayloadLimitsTable;
}

export type WorkflowRunRow = Selectable<WorkflowRunTable>;
export type NewWorkflowRun = Insertable<WorkflowRunTable>;
export type WorkflowRunUpdate = Updateable<WorkflowRunTable>;
export type StepAttemptRow = Selectable<StepAttemptTable>;
export type StepEffectRow = Selectable<StepEffectTable>;
export type StepResultRow = Selectable<StepResultTable>;
export type StepWaitRow = Selectable<StepWaitTable>;
export type EventRow = Selectable<EventTable>;
export type ScheduleRow = Selectable<ScheduleTable>;
export type OperatorActionRow = Selectable<OperatorActionTable>;
export type RunArchiveRow = Selectable<RunArchiveTable>;
export type EffectArchiveRow = Selectable<EffectArchiveTable>;
