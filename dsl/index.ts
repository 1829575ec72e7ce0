import './check-peer-dependencies.js';
export {
  workflow,
  Workflow,
  type AnyWorkflow,
  type ChildConfig,
  type FanOutDefinition,
  type ForEachConfig,
  type QueueUseDefinition,
  type SleepDefinition,
  type WaitDefinition,
  type WorkflowResult,
  type StepDefinition,
  type WorkflowInput,
  type WorkflowOptions,
  type WorkflowOutput,
  type WorkflowStartInput,
  type WorkflowStepName,
  type WorkflowStepSpec,
} from './workflow.js';
export { DEFAULT_PERFORM_TIMEOUT_MS } from './step-options.js';
export type {
  ExternalStepConfig,
  ItemContext,
  KeyContext,
  KeyFn,
  PlainStepConfig,
  QueueUse,
  SleepOutput,
  TransactionalStepConfig,
  WaitForConfig,
  WaitForOutput,
  WhenFn,
} from './step-configs.js';
export type { DuplicateStepName, StepSpec, WorkflowTypes } from './workflow-types.js';
export {
  STEP_KINDS,
  isBuiltInKind,
  isEffectKind,
  type BuiltInStepKind,
  type EffectStepKind,
  type HandlerStepKind,
  type StepKind,
} from './step-kind.js';
export {
  queue,
  QUEUE_NAME,
  type PartitionLimits,
  type QueueDefinition,
  type QueueLimits,
  type RateLimit,
} from './queue.js';
export {
  event,
  EVENT_NAME,
  type AnyEvent,
  type EventDefinition,
  type EventPayload,
  type EventSendPayload,
} from './event.js';
export {
  DEFAULT_RETRY_POLICY,
  resolveRetryPolicy,
  type ResolvedRetryPolicy,
  type RetryPolicy,
} from './retry-policy.js';
export { shapeHash, shapeOf, type StepShape, type WorkflowShape } from './workflow-shape.js';
export {
  schedule,
  SCHEDULE_NAME,
  MAX_CATCH_UP,
  type AnySchedule,
  type CatchUpPolicy,
  type ScheduleConfig,
  type ScheduleContext,
  type ScheduleDefinition,
} from './schedule.js';
