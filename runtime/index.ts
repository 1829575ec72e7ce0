/*
 * `ledgerflow/runtime`: what an application needs to run its workflows — the store, the
 * migrations, the client, the worker, the handler contract and the errors it may meet.
 *
 * Beside it: `ledgerflow/operator` (one pass of the reconciler, the schedules or retention from
 * your own code, the payload limits, the roles' GRANTs, the telemetry names),
 * `ledgerflow/dashboard`, `ledgerflow/schema` (the `ledgerflow.*` tables' row types, status sets
 * and SQLSTATEs) and `ledgerflow/testing`. What none of them exports is internal; the reports
 * under api/ (`npm run check:api`) list each entry point's names.
 */
import '../dsl/check-peer-dependencies.js';
export { openStore, DEFAULT_DATA_DIR, type OpenStoreOptions, type PoolerOptions } from './store/open-store.js';
export type { Store, StoreKind } from './store/store.js';
export type {
  Json,
  OperatorActionKind,
  OperatorActionRow,
  RunStatus,
  StepEffectRow,
  WorkflowRunRow,
} from './store/tables.js';
export { migrate, type MigrateOptions, type MigrateResult } from './migrate/migrate.js';
export {
  DEFAULT_MIGRATIONS_DIR,
  type Migration,
  type MigrationFile,
  type MigrationSource,
} from './migrate/migration-source.js';
export { Recorded } from './contracts/recorded.js';
export {
  found,
  notFound,
  unknownOutcome,
  type HandlerFor,
  type IdempotentExternalHandler,
  type IntentInfo,
  type PerformContext,
  type PlainStepContext,
  type ReadOnlyDatabase,
  type ReconcileContext,
  type ReconcileOutcome,
  type ReconcilingExternalHandler,
  type StepContext,
  type StepHandler,
  type TransactionalContext,
  type TransactionalHandler,
} from './contracts/handler-types.js';
export {
  bindHandlers,
  StaleContractError,
  type WorkflowHandlers,
  type WorkflowRegistration,
} from './contracts/registration.js';
export {
  ConflictError,
  DuplicateEventError,
  DuplicateRunError,
  LeaseLostError,
  LedgerflowError,
  MigrationError,
  NonRetryableError,
  NotAppliedError,
  PayloadTooLargeError,
  type PayloadKind,
  QueueNotFoundError,
  RecordImmutableError,
  RunNotFoundError,
  RunPrunedError,
  ScheduleNotFoundError,
  StoreLockedError,
  UnknownWorkflowError,
  ValidationError,
  WaitTimeoutError,
} from './errors.js';
export {
  createClient,
  type Client,
  type ClientOptions,
  type EffectFilter,
  type RunFilter,
  type WaitOptions,
  type StartAndWaitOptions,
} from './client/client.js';
export type { AuditFilter } from './client/operator/audit.js';
export type { CancelOptions } from './client/operator/cancel.js';
export type { OperatorNote } from './client/operator/operator-action.js';
export type { EffectResolution, ResolvedEffect } from './client/operator/resolve.js';
export type { RetriedRun } from './client/operator/retry.js';
export type { ChildRunSummary, RunDetails, SettledRun, SettledRunStatus } from './client/run-details.js';
export type { EventSender, SendEventOptions, SentEvent } from './client/send-event.js';
export type { WorkflowVersionSummary } from './client/workflow-versions.js';
export type { QueueListOptions, QueuePartitionSummary, QueueSummary } from './client/queues.js';
export type { ScheduleSummary } from './client/schedules.js';
export type { DebounceOptions } from './client/debounce.js';
export type { StartedRun, StartOptions } from './client/start-run.js';
export { createWorker, type Worker, type WorkerOptions } from './worker/worker.js';
export type { WorkerEvent } from './worker/worker-events.js';
export type { FailureOutcome } from './worker/failure-commits.js';
export { ChildFailedError, DEFAULT_CHILDREN_PER_COMMIT } from './worker/executors/children-executor.js';
export { HandlerTimeoutError, PerformTimeoutError, type SerializedError } from './worker/step-errors.js';
export { ReadOnlyStepError } from './worker/executors/read-only-db.js';
export type { RetentionOptions } from './worker/retention-timer.js';
export { formatEventJson, jsonEventLogger, type LogLevel } from './telemetry/event-log.js';
export type { TelemetryOptions } from './telemetry/telemetry.js';
export type { MeterProviderLike, TracerProviderLike } from './telemetry/otel-api.js';
