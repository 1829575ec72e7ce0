import { describePart, describePartitionKey, type CheckedFunctionPart } from '../model/pinned-parts.js';
import type { FunctionModel, StepModel, WorkflowModel } from '../model/workflow-model.js';
import type { ValidationInput } from './rule.js';

/**
 * One function the runtime evaluates that codegen checks like a key, with its workflow and step.
 * A partition key also names its queue; that of the queue a workflow's runs hold has no step: it
 * is evaluated for the whole run, over its input alone.
 */
export type CheckedFunction =
  | {
      readonly workflow: WorkflowModel;
      readonly step: StepModel;
      readonly part: Exclude<CheckedFunctionPart, 'partitionKey'>;
      readonly fn: FunctionModel;
    }
  | {
      readonly workflow: WorkflowModel;
      readonly step: StepModel | null;
      readonly part: 'partitionKey';
      readonly fn: FunctionModel;
      readonly queue: string;
    };

/**
 * Every checked function (the workflow's partition key first; then per step: the key, the others
 * in order, its partition key): what LF002–LF004 iterate over.
 */
export function* checkedFunctions(input: ValidationInput): Generator<CheckedFunction> {
  for (const workflow of input.analysis.workflows) {
    const run = workflow.queue;
    if (run !== undefined && run.partitionKey !== null) yield { workflow, step: null, part: 'partitionKey', fn: run.partitionKey, queue: run.queue.name };
    for (const step of workflow.steps) {
      if (step.key !== null) yield { workflow, step, part: 'key', fn: step.key };
      for (const fn of step.functions) yield { workflow, step, part: fn.part, fn };
      const use = step.queue;
      if (use !== undefined && use.partitionKey !== null) yield { workflow, step, part: 'partitionKey', fn: use.partitionKey, queue: use.queue.name };
    }
  }
}

/** How the messages of LF002–LF004 speak of one checked function. */
export interface FunctionWording {
  /** How a message starts: `key of step "charge"`, `the condition (when) of step "vip"`. */
  readonly subject: string;
  /** The function again, later in a sentence: `the key`, or `it`. */
  readonly it: string;
  /** The function as a noun: `the key`, or `the function`. */
  readonly noun: string;
  /** What a retry could do if the function were impure. */
  readonly consequence: string;
  /** The argument it may read. */
  readonly argument: string;
  readonly isKey: boolean;
  /** It sees earlier steps' outputs (every function of a step does; a workflow's partition key does not). */
  readonly seesSteps: boolean;
}

const CONSEQUENCES: Readonly<Record<CheckedFunctionPart, string>> = {
  key: 'a retry could compute another key and repeat the effect',
  when: 'a retry could decide differently whether the step runs',
  for: 'a retry could compute another wake-up time',
  until: 'a retry could compute another wake-up time',
  match: 'a retry could wait for another correlation key and miss its event',
  items: 'a retry could fan out over another list',
  childInput: 'a retry could start a child with another input',
  partitionKey: "a retry could ask for a slot in another partition, and the partition's limits would not hold",
};

export function wordingOf(checked: CheckedFunction): FunctionWording {
  const { workflow, step, part } = checked;
  const isKey = part === 'key';
  const perItem = step?.kind === 'forEach' && (part === 'key' || part === 'childInput');
  return {
    subject:
      checked.part === 'partitionKey'
        ? describePartitionKey(checked.queue, { workflow: workflow.name, step: step?.name ?? null })
        : isKey
          ? `key of step "${checked.step.name}"`
          : describePart({ kind: checked.part, step: checked.step.name }),
    it: isKey ? 'the key' : 'it',
    noun: isKey ? 'the key' : 'the function',
    consequence: CONSEQUENCES[part],
    argument: step === null ? '({ input })' : perItem ? '({ item, index, input, steps })' : '({ input, steps })',
    isKey,
    seesSteps: step !== null,
  };
}
