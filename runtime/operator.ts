/*
 * `ledgerflow/operator`: what docs/operations/ explains beyond the client's operator actions —
 * one pass of the reconciler, of the schedules or of retention run from your own code, the payload
 * limits every client and worker applies, the GRANTs of the least-privilege roles, and the names
 * of the spans, attributes and metrics the worker emits.
 */
import '../dsl/check-peer-dependencies.js';
export { runReconcilePass, type ReconcilePassOptions } from './reconciler/reconciler.js';
export type { ReconcileItem, ReconcileItemOutcome, ReconcileReport } from './reconciler/reconcile-report.js';
export {
  runSchedulePass,
  type ScheduleFailed,
  type SchedulePassOptions,
  type SchedulePassReport,
  type ScheduleTicked,
} from './schedules/schedule-pass.js';
export { pruneRuns, type PruneReport } from './retention/prune.js';
export { DEFAULT_PRUNE_BATCH_SIZE, type PruneBatch, type PruneOptions } from './retention/prune-options.js';
export type { PrunedRun } from './retention/pruned-run.js';
export {
  DEFAULT_PAYLOAD_LIMITS,
  MAX_JSON_DEPTH,
  readPayloadLimits,
  setPayloadLimits,
  type PayloadLimits,
  type StoredPayloadLimits,
} from './limits/payload-limits.js';
export { LIMITS_CACHE_MS } from './limits/limits-cache.js';
export { grantRoleProblems, grantStatements, type GrantRoles } from './roles/grants.js';
export {
  ATTR as TELEMETRY_ATTRIBUTES,
  INSTRUMENTATION_SCOPE,
  METRIC as TELEMETRY_METRICS,
  eventAttributes,
} from './telemetry/attributes.js';
