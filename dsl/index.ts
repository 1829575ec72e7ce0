export {
  workflow,
  Workflow,
  DEFAULT_PERFORM_TIMEOUT_MS,
  type AnyWorkflow,
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
export { STEP_KINDS, isEffectKind, type EffectStepKind, type StepKind } from './step-kind.js';
export { DEFAULT_RETRY_POLICY, resolveRetryPolicy, type ResolvedRetryPolicy, type RetryPolicy } from './retry-policy.js';
export { shapeHash, shapeOf, type WorkflowShape } from './workflow-shape.js';
