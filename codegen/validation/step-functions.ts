import { describePart, describePartitionKey, type CheckedFunctionPart } from '../model/pinned-parts.js';
import type {
  CompensationModel,
  FunctionModel,
  ScheduleModel,
  StepModel,
  WorkflowModel,
} from '../model/workflow-model.js';
import type { ValidationInput } from './rule.js';

/** What a checked function is: a part of a step or a run, or the input a schedule builds for each tick. */
export type CheckedPart = CheckedFunctionPart | 'scheduleInput';

/**
 * One function the runtime evaluates that codegen checks like a key, with its workflow and step.
 * A partition key also names its queue; that of the queue a workflow's runs hold has no step: it
 * is evaluated for the whole run, over its input alone. A schedule's input belongs to no workflow:
 * a worker evaluates it for each tick, over `({ scheduledAt })`.
 */
export type CheckedFunction =
  | {
      readonly workflow: WorkflowModel;
      /** A step, or a step's compensation (whose checked functions are its key and request). */
      readonly step: StepModel | CompensationModel;
      readonly part: Exclude<CheckedFunctionPart, 'partitionKey'>;
      readonly fn: FunctionModel;
    }
  | {
      readonly workflow: WorkflowModel;
      readonly step: StepModel | null;
      readonly part: 'partitionKey';
      readonly fn: FunctionModel;
      readonly queue: string;
    }
  | {
      readonly workflow: null;
      readonly step: null;
      readonly part: 'scheduleInput';
      readonly fn: FunctionModel;
      readonly schedule: ScheduleModel;
    };

/**
 * Every checked function (per workflow, its partition key first; then per step: the key, the
 * others in order — its request among them —, its partition key, its compensation's key and
 * request; then each schedule's input): what LF002–LF004 iterate over.
 */
export function* checkedFunctions(input: ValidationInput): Generator<CheckedFunction> {
  for (const workflow of input.analysis.workflows) {
    const run = workflow.queue;
    if (run !== undefined && run.partitionKey !== null)
      yield { workflow, step: null, part: 'partitionKey', fn: run.partitionKey, queue: run.queue.name };
    for (const step of workflow.steps) {
      if (step.key !== null) yield { workflow, step, part: 'key', fn: step.key };
      for (const fn of step.functions) yield { workflow, step, part: fn.part, fn };
      const use = step.queue;
      if (use !== undefined && use.partitionKey !== null)
        yield { workflow, step, part: 'partitionKey', fn: use.partitionKey, queue: use.queue.name };
      const compensation = step.compensation;
      if (compensation?.key !== undefined && compensation.key !== null)
        yield { workflow, step: compensation, part: 'key', fn: compensation.key };
      for (const fn of compensation?.functions ?? []) yield { workflow, step: compensation!, part: fn.part, fn };
    }
  }
  for (const schedule of input.analysis.schedules) {
    if (schedule.input !== null)
      yield { workflow: null, step: null, part: 'scheduleInput', fn: schedule.input, schedule };
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
  /** It sees earlier steps' outputs (every function of a step does; a workflow's partition key and a schedule's input do not). */
  readonly seesSteps: boolean;
  /** How to do without a value it must not read: `pass the value in the workflow input`. */
  readonly supply: string;
  /** What it may read, after "which is": `neither input nor an earlier step`. */
  readonly readable: string;
}

const CONSEQUENCES: Readonly<Record<CheckedPart, string>> = {
  key: 'a retry could compute another key and repeat the effect',
  request: 'a retry could hash another request under the same key and fail as a conflict',
  when: 'a retry could decide differently whether the step runs',
  for: 'a retry could compute another wake-up time',
  until: 'a retry could compute another wake-up time',
  match: 'a retry could wait for another correlation key and miss its event',
  items: 'a retry could fan out over another list',
  childInput: 'a retry could start a child with another input',
  partitionKey: "a retry could ask for a slot in another partition, and the partition's limits would not hold",
  scheduleInput: "a tick's run could start with an input other than its tick's — a late or caught-up tick's above all",
};

export function wordingOf(checked: CheckedFunction): FunctionWording {
  if (checked.part === 'scheduleInput') {
    return {
      subject: `the input of schedule "${checked.schedule.name}"`,
      it: 'it',
      noun: 'the function',
      consequence: CONSEQUENCES.scheduleInput,
      argument: '({ scheduledAt })',
      isKey: false,
      seesSteps: false,
      supply: "derive the value from scheduledAt, or write it in the schedule's declaration",
      readable: 'not its scheduledAt',
    };
  }
  const { workflow, step, part } = checked;
  const isKey = part === 'key';
  const perItem = step?.kind === 'forEach' && (part === 'key' || part === 'childInput');
  return {
    subject:
      checked.part === 'partitionKey'
        ? describePartitionKey(checked.queue, { workflow: workflow.name, step: step?.name ?? null })
        : isKey
          ? keySubject(checked.step)
          : describePart(
              { kind: checked.part, step: checked.step.name },
              'compensates' in checked.step ? checked.step.compensates : undefined,
            ),
    it: isKey ? 'the key' : 'it',
    noun: isKey ? 'the key' : 'the function',
    consequence: CONSEQUENCES[part],
    argument: step === null ? '({ input })' : perItem ? '({ item, index, input, steps })' : '({ input, steps })',
    isKey,
    seesSteps: step !== null,
    supply: 'pass the value in the workflow input',
    readable: 'neither input nor an earlier step',
  };
}

/** `key of step "charge"`, `key of compensation "refund" (of step "charge")`. */
export function keySubject(step: StepModel | CompensationModel): string {
  return 'compensates' in step
    ? `key of compensation "${step.name}" (of step "${step.compensates}")`
    : `key of step "${step.name}"`;
}
