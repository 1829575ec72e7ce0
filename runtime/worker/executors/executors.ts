/*
 * The executor of each step kind (DESIGN.md "Step kinds and their protocols"), as one record the
 * run driver dispatches on: a new kind without an executor is a compile error. No state.
 */
import type { StepKind } from '../../../dsl/step-kind.js';
import { executeChildren } from './children-executor.js';
import { executeExternal } from './external-executor.js';
import { executeSleep } from './sleep-executor.js';
import { executeStep } from './step-executor.js';
import type { StepExecutor } from './step-execution.js';
import { executeTransactional } from './transactional-executor.js';
import { executeWaitFor } from './wait-for-executor.js';

/** One executor per step kind: a new kind without one does not compile. */
export const STEP_EXECUTORS: Readonly<Record<StepKind, StepExecutor>> = {
  step: executeStep,
  transactional: executeTransactional,
  external: executeExternal,
  sleep: executeSleep,
  waitFor: executeWaitFor,
  child: executeChildren,
  forEach: executeChildren,
};
