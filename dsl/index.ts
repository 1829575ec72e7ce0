import './check-peer-dependencies.js';
export {
  workflow,
  Workflow,
  DEFAULT_PERFORM_TIMEOUT_MS,
  type AnyWorkflow,
  type ChildConfig,
  type FanOutDefinition,
  type ForEachConfig,
  type ItemContext,
  type QueueUse,
  type QueueUseDefinition,
  type SleepDefinition,
  type SleepOutput,
  type WaitDefinition,
  type WaitForConfig,
  type WaitForOutput,
  type WhenFn,
  type WorkflowResult,
  type DuplicateStepName,
  type ExternalStepConfig,
  type KeyContext,
  type KeyFn,
  type PlainStepConfig,
  type StepDefinition,
  type StepSpec,
  type TransactionalStepConfig,
  type WorkflowInput,
  type WorkflowOptions,
  type WorkflowOutput,
  type WorkflowStartInput,
  type WorkflowStepName,
  type WorkflowStepSpec,
  type WorkflowTypes,
} from './workflow.js';
export {
  STEP_KINDS,
  isBuiltInKind,
  isEffectKind,
  type BuiltInStepKind,
  type EffectStepKind,
  type HandlerStepKind,
  type StepKind,
} from './step-kind.js';
export { queue, QUEUE_NAME, type PartitionLimits, type QueueDefinition, type QueueLimits, type RateLimit } from './queue.js';
export { event, EVENT_NAME, type AnyEvent, type EventDefinition, type EventPayload, type EventSendPayload } from './event.js';
export { DEFAULT_RETRY_POLICY, resolveRetryPolicy, type ResolvedRetryPolicy, type RetryPolicy } from './retry-policy.js';
export { shapeHash, shapeOf, type StepShape, type WorkflowShape } from './workflow-shape.js';
export { schedule, SCHEDULE_NAME, MAX_CATCH_UP, type AnySchedule, type CatchUpPolicy, type ScheduleConfig, type ScheduleContext, type ScheduleDefinition } from './schedule.js';
