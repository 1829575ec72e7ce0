import { describePart, type CheckedFunctionPart } from '../model/pinned-parts.js';
import type { FunctionModel, StepModel, WorkflowModel } from '../model/workflow-model.js';
import type { ValidationInput } from './rule.js';

/** One function the runtime evaluates for a step that codegen checks like a key, with its step and workflow. */
export interface CheckedFunction {
  readonly workflow: WorkflowModel;
  readonly step: StepModel;
  readonly part: CheckedFunctionPart;
  readonly fn: FunctionModel;
}

/** Every checked function (per step: the key first, then the others in order): what LF002–LF004 iterate over. */
export function* checkedFunctions(input: ValidationInput): Generator<CheckedFunction> {
  for (const workflow of input.analysis.workflows) {
    for (const step of workflow.steps) {
      if (step.key !== null) yield { workflow, step, part: 'key', fn: step.key };
      for (const fn of step.functions) yield { workflow, step, part: fn.part, fn };
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
}

const CONSEQUENCES: Readonly<Record<CheckedFunctionPart, string>> = {
  key: 'a retry could compute another key and repeat the effect',
  when: 'a retry could decide differently whether the step runs',
  for: 'a retry could compute another wake-up time',
  until: 'a retry could compute another wake-up time',
  match: 'a retry could wait for another correlation key and miss its event',
  items: 'a retry could fan out over another list',
  childInput: 'a retry could start a child with another input',
};

export function wordingOf({ step, part }: Pick<CheckedFunction, 'step' | 'part'>): FunctionWording {
  const isKey = part === 'key';
  const perItem = step.kind === 'forEach' && (part === 'key' || part === 'childInput');
  return {
    subject: isKey ? `key of step "${step.name}"` : describePart({ kind: part, step: step.name }),
    it: isKey ? 'the key' : 'it',
    noun: isKey ? 'the key' : 'the function',
    consequence: CONSEQUENCES[part],
    argument: perItem ? '({ item, index, input, steps })' : '({ input, steps })',
    isKey,
  };
}
