import '../dsl/check-peer-dependencies.js';
export { openStore, DEFAULT_DATA_DIR, type OpenStoreOptions } from './store/open-store.js';
export type { Store, StoreKind } from './store/store.js';
export type * from './store/tables.js';
export { FINAL_RUN_STATUSES, RUN_STATUSES } from './store/tables.js';
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
export { migrate, type MigrateOptions, type MigrateResult } from './migrate/migrate.js';
export {
  DEFAULT_PAYLOAD_LIMITS,
  MAX_JSON_DEPTH,
  readPayloadLimits,
  setPayloadLimits,
  type PayloadLimits,
  type StoredPayloadLimits,
} from './limits/payload-limits.js';
export { LIMITS_CACHE_MS } from './limits/limits-cache.js';
export { CORE_MIGRATIONS_DIR, coreMigrations, type CoreMigration } from './migrate/core-migrations.js';
export {
  DEFAULT_MIGRATIONS_DIR,
  loadMigrations,
  migrationChecksum,
  type Migration,
  type MigrationFile,
  type MigrationSource,
} from './migrate/migration-source.js';
export { SQLSTATE, sqlStateOf, type SqlState } from './store/sqlstate.js';
export {
  createClient,
  type Client,
  type ClientOptions,
  type EffectFilter,
  type RunFilter,
  type WaitOptions,
  type StartAndWaitOptions,
} from './client/client.js';
export type {
  AuditFilter,
  EffectResolution,
  OperatorNote,
  CancelOptions,
  ResolvedEffect,
  RetriedRun,
} from './client/operator.js';
export { SETTLED_RUN_STATUSES, MAX_LISTED_CHILDREN, type ChildRunSummary, type RunDetails, type SettledRun, type SettledRunStatus } from './client/run-details.js';
export type { EventSender, SendEventOptions, SentEvent } from './client/send-event.js';
export { ChildFailedError, DEFAULT_CHILDREN_PER_COMMIT } from './worker/executors/children-executor.js';
export type { WorkflowVersionSummary } from './client/workflow-versions.js';
export type { QueueListOptions, QueuePartitionSummary, QueueSummary } from './client/queues.js';
export type { ScheduleSummary } from './client/schedules.js';
export { ON_TIME_MS } from './schedules/due-ticks.js';
export {
  runSchedulePass,
  tickDedupeKey,
  type ScheduleFailed,
  type SchedulePassOptions,
  type SchedulePassReport,
  type ScheduleTicked,
} from './schedules/schedule-pass.js';
export type { DebounceOptions } from './client/debounce.js';
export type { StartedRun, StartOptions } from './client/start-run.js';
export { describeIssues } from './client/validate-input.js';
export { createWorker, type Worker, type WorkerOptions } from './worker/worker.js';
export { RUNS_CHANNEL } from './store/channels.js';
export type { WorkerEvent } from './worker/worker-events.js';
export type { FailureOutcome } from './worker/failure-commits.js';
export { HandlerTimeoutError, PerformTimeoutError, type SerializedError } from './worker/step-errors.js';
export { ReadOnlyStepError } from './worker/executors/read-only-db.js';
export { runReconcilePass, type ReconcilePassOptions } from './reconciler/reconciler.js';
export type { ReconcileItem, ReconcileItemOutcome, ReconcileReport } from './reconciler/reconcile-report.js';

export {
  DEFAULT_PRUNE_BATCH_SIZE,
  pruneRuns,
  type PruneBatch,
  type PruneOptions,
  type PruneReport,
} from './retention/prune.js';
export type { PrunedRun } from './retention/pruned-run.js';
export type { RetentionOptions } from './worker/retention-timer.js';
export { grantRoleProblems, grantStatements, type GrantRoles } from './roles/grants.js';
export {
  ATTR as TELEMETRY_ATTRIBUTES,
  INSTRUMENTATION_SCOPE,
  METRIC as TELEMETRY_METRICS,
  eventAttributes,
} from './telemetry/attributes.js';
export { formatEventJson, jsonEventLogger, type LogLevel } from './telemetry/event-log.js';
export type { TelemetryOptions } from './telemetry/telemetry.js';
export type { MeterProviderLike, TracerProviderLike } from './telemetry/otel-api.js';
export { createDashboard, type DashboardOptions } from './dashboard/dashboard.js';
export {
  serveDashboard,
  DEFAULT_DASHBOARD_HOST,
  DEFAULT_DASHBOARD_PORT,
  type ServeDashboardOptions,
  type ServedDashboard,
} from './dashboard/serve-dashboard.js';
export type { DashboardAuth, DashboardAuthHook, DashboardIdentity } from './dashboard/auth.js';
export type { DashboardOperations } from './dashboard/operations.js';
