import { ts } from 'ts-morph';
import { STEP_NAME } from '../../dsl/names.js';
import type { StepKind } from '../../dsl/step-kind.js';
import {
  describePart,
  isCheckedFunctionPart,
  QUEUED_STEP_KINDS,
  STEP_CONFIG_PART_KINDS,
  STEP_PART_PROPERTIES,
  STEP_PARTS_BY_KIND,
  type CheckedFunctionPart,
  type PinnedPart,
  type QueuePart,
} from '../model/pinned-parts.js';
import type {
  CompensationModel,
  FanOutModel,
  FunctionModel,
  KeyModel,
  MalformedDeclaration,
  QueueUseModel,
  StepFunctionModel,
  StepModel,
  WaitModel,
} from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import { readCompensation } from './compensation-declarations.js';
import { readEventReference, readWorkflowReference } from './dsl-declarations.js';
import { functionContext, functionModel } from './function-model.js';
import { keyValue } from './key-value.js';
import { analyzeKeyValues } from './key-values.js';
import { initializerText, pinPart, resolveFunction, assignedValue } from './property-values.js';
import type { PurityAnalyzer } from './purity-analyzer.js';
import { readQueueUse } from './queue-uses.js';
import { schemaShape } from './schema-shapes.js';
import { itemShape, type ValueContext, type VisibleStepShape } from './shape-reader.js';
import type { ValueShape } from '../model/key-values.js';
import { propertyName, skipWrappers } from './syntax.js';

/** One call of a step method in a workflow chain. */
export interface StepCall {
  readonly kind: StepKind;
  readonly call: ts.CallExpression;
  readonly method: ts.MemberName;
}

/**
 * What a step's declaration is read against: its workflow, the workflow files a child may be
 * declared in (absolute), and the queue the workflow's runs hold (a step cannot ask for it again).
 */
export interface StepScope {
  readonly workflow: string;
  /** The shape of the workflow's input, from its schema. */
  readonly inputShape: ValueShape;
  readonly workflowFiles: ReadonlySet<string>;
  readonly queue: string | null;
}

/** The config each kind takes, for messages. */
const CONFIG_SHAPES: Readonly<Record<StepKind, string>> = {
  step: '{ output, key, ... }',
  transactional: '{ output, key, ... }',
  external: '{ output, key, ... }',
  sleep: '{ for } or { until }',
  waitFor: '{ event, match, timeoutMs }',
  child: '{ key, input }',
  forEach: '{ items, key, workflow, input }',
};

/** The checked functions a step's config declares by a property of its own (the partition key is its queue use's). */
type ConfigFunctionPart = Exclude<CheckedFunctionPart, QueuePart>;

/** An inline function of each checked part, for messages; a `forEach` step's per-item functions see `item`. */
const FUNCTION_EXAMPLES: Readonly<Record<ConfigFunctionPart, string>> = {
  key: '({ input, steps }) => `...`',
  request: '({ input, steps }) => ({ ... })',
  when: '({ input, steps }) => boolean',
  for: '({ input, steps }) => milliseconds',
  until: '({ input, steps }) => Date',
  match: '({ input, steps }) => string',
  items: '({ input, steps }) => [...]',
  childInput: '({ input, steps }) => ({ ... })',
};
const PER_ITEM_EXAMPLES: Readonly<Partial<Record<ConfigFunctionPart, string>>> = {
  key: '({ input, item }) => `...`',
  childInput: '({ item }) => ({ ... })',
};

/**
 * Reads one step of a workflow chain: its name and config, every function the runtime evaluates
 * for it (each analysed for purity over its context, like a key), the event it waits for or the
 * workflow it starts, and the parts a run in flight depends on. Anything codegen cannot read
 * statically is reported as malformed (LF008) with what to write instead; the step is then null.
 */
export function readStep(
  program: AnalysisProgram,
  analyzer: PurityAnalyzer,
  scope: StepScope,
  { kind, call, method }: StepCall,
  earlier: readonly StepModel[],
  malformed: MalformedDeclaration[],
): { model: StepModel; parts: PinnedPart[] } | null {
  const position = earlier.length;
  const report = (node: ts.Node, message: string): null => {
    malformed.push({ location: program.location(node), message });
    return null;
  };
  const [nameArgument, ...rest] = call.arguments;
  const childArgument = kind === 'child' ? rest[0] : undefined;
  const configArgument = kind === 'child' ? rest[1] : rest[0];
  const nameNode = nameArgument === undefined ? undefined : skipWrappers(nameArgument);
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode))) {
    return report(
      nameArgument ?? method,
      `step ${position + 1} of workflow "${scope.workflow}" needs a string literal name, e.g. .${kind}('charge', { ... }).`,
    );
  }
  const name = nameNode.text;
  if (!STEP_NAME.test(name)) {
    return report(
      nameNode,
      `step name "${name}" is invalid: use letters, digits and _ (max 63 characters), starting with a letter or _.`,
    );
  }
  const config = configArgument === undefined ? undefined : skipWrappers(configArgument);
  if (config === undefined || !ts.isObjectLiteralExpression(config)) {
    const what = CONFIG_SHAPES[kind].includes('key') ? 'its key' : 'it';
    return report(
      configArgument ?? method,
      `the config of step "${name}" must be an object literal (${CONFIG_SHAPES[kind]}) so codegen can read ${what}.`,
    );
  }
  const properties = new Map<string, ts.ObjectLiteralElementLike>();
  for (const property of config.properties) {
    if (ts.isSpreadAssignment(property)) {
      return report(
        property,
        `the config of step "${name}" uses a spread; write key, idempotentByKey and the other properties out so codegen can see them.`,
      );
    }
    const key = propertyName(property);
    if (key !== null) properties.set(key, property);
  }

  let idempotentByKey = false;
  const idempotent = properties.get('idempotentByKey');
  if (idempotent !== undefined) {
    const value = ts.isPropertyAssignment(idempotent) ? skipWrappers(idempotent.initializer) : undefined;
    if (
      value === undefined ||
      (value.kind !== ts.SyntaxKind.TrueKeyword && value.kind !== ts.SyntaxKind.FalseKeyword)
    ) {
      return report(
        idempotent,
        `idempotentByKey of step "${name}" must be the literal true or false; it decides whether the handler must supply reconcile.`,
      );
    }
    idempotentByKey = kind === 'external' && value.kind === ts.SyntaxKind.TrueKeyword;
  }

  // Every function the runtime evaluates for the step, checked like a key over its own context.
  const earlierNames = earlier.map((step) => step.name);
  const functions = new Map<ConfigFunctionPart, FunctionModel>();
  // What the value analysis knows of the context: the input's and earlier outputs' shapes, the item's.
  const visibleShapes = new Map<string, VisibleStepShape>(earlier.map((s) => [s.name, visibleShape(s)]));
  const whenProperty = properties.get('when');
  const ownWhen = whenProperty === undefined ? null : (initializerText(whenProperty) ?? whenProperty.getText());
  const valueContext = (perItem: boolean, item: ValueShape = { kind: 'unknown' }): ValueContext => ({
    context: functionContext(earlierNames, perItem),
    input: scope.inputShape,
    steps: visibleShapes,
    item,
    ownWhen,
    ownStep: null,
  });
  const itemsProperty = kind === 'forEach' ? properties.get('items') : undefined;
  const itemsFn = itemsProperty === undefined ? null : resolveFunction(program, itemsProperty);
  const item: ValueShape =
    itemsFn === null || itemsFn === 'absent' ? { kind: 'unknown' } : itemShape(program, itemsFn, valueContext(false));
  for (const part of STEP_PARTS_BY_KIND[kind]) {
    if (!isCheckedFunctionPart(part)) continue;
    const property = properties.get(STEP_PART_PROPERTIES[part]);
    if (property === undefined) continue;
    const fn = resolveFunction(program, property);
    if (fn === 'absent') continue;
    const perItem = kind === 'forEach' && (part === 'key' || part === 'childInput');
    if (fn === null) {
      const example = (perItem ? PER_ITEM_EXAMPLES[part] : undefined) ?? FUNCTION_EXAMPLES[part];
      return report(
        property,
        `${describePart({ kind: part, step: name })} must be a function — inline (${example}) or the name of a function declared in this file or exported by a relative module — so codegen can check that it is pure.`,
      );
    }
    const values = analyzeKeyValues(program, fn, valueContext(perItem, item));
    const model = {
      ...functionModel(program, property, analyzer.analyze(fn, functionContext(earlierNames, perItem))),
      values,
    };
    const key: KeyModel | null = part === 'key' ? { ...model, value: keyValue(program, fn) } : null;
    functions.set(part, key ?? model);
  }
  const missing = missingFunction(kind, name, functions);
  if (missing !== null) return report(method, missing);

  let wait: WaitModel | undefined;
  if (kind === 'waitFor') {
    const property = properties.get('event');
    if (property === undefined) {
      return report(
        method,
        `waitFor step "${name}" names no event; add event: paymentSettled, the const of an event declared with export const paymentSettled = event('payment.settled', z.object({ ... })).`,
      );
    }
    const event = readEventReference(program, assignedValue(property), property, `the event of step "${name}"`);
    if ('problem' in event) return report(property, event.problem);
    wait = { event, timeoutText: initializerText(properties.get('timeoutMs')) };
  }

  let fanOut: FanOutModel | undefined;
  if (kind === 'child' || kind === 'forEach') {
    const property = kind === 'forEach' ? properties.get('workflow') : undefined;
    const value = kind === 'child' ? (childArgument ?? null) : property === undefined ? null : assignedValue(property);
    const at = kind === 'child' ? childArgument : property;
    if (at === undefined) {
      return report(
        method,
        kind === 'child'
          ? `child step "${name}" names no workflow to start; pass the workflow's const as the second argument: .child('${name}', shipment, { key, input }).`
          : `forEach step "${name}" names no workflow to start; add workflow: the const of a workflow declared in a *.workflow.ts file.`,
      );
    }
    const workflow = readWorkflowReference(
      program,
      value,
      at,
      `the child workflow of step "${name}"`,
      scope.workflow,
      scope.workflowFiles,
    );
    if ('problem' in workflow) return report(at, workflow.problem);
    fanOut = { workflow, concurrencyText: kind === 'forEach' ? initializerText(properties.get('concurrency')) : null };
  }

  // What runs in flight depend on: the output schema, every function the runtime evaluates, and the values that steer it.
  const parts: PinnedPart[] = [];
  const applicable = STEP_PARTS_BY_KIND[kind];
  for (const part of STEP_CONFIG_PART_KINDS) {
    if (!applicable.includes(part)) continue;
    const property = properties.get(STEP_PART_PROPERTIES[part]);
    if (property === undefined || (isCheckedFunctionPart(part) && !functions.has(part))) continue;
    const pinned = pinPart(program, property, part, name, describePart({ kind: part, step: name }), malformed);
    if (pinned === null) return null;
    parts.push(pinned);
  }

  // Each attempt's queue slot, with the parts it pins (the queue's declaration, the partition key).
  let queue: QueueUseModel | undefined;
  const queueProperty = QUEUED_STEP_KINDS.includes(kind) ? properties.get('queue') : undefined;
  if (queueProperty !== undefined) {
    const read = readQueueUse(
      program,
      analyzer,
      queueProperty,
      { workflow: scope.workflow, step: name, context: functionContext(earlierNames) },
      malformed,
    );
    if (read === null) return null;
    if (read.use.queue.name === scope.queue) {
      return report(
        queueProperty,
        `step "${name}" asks for a slot of queue "${scope.queue}", which every run of workflow "${scope.workflow}" already holds from its first step on; ` +
          "remove the step's queue (the run's slot covers it), or put the step behind a queue of its own.",
      );
    }
    queue = read.use;
    parts.push(...read.parts);
  }

  const outputProperty = properties.get('output');
  const outputShape = schemaShape(program, outputProperty === undefined ? null : assignedValue(outputProperty));

  // What undoes the step's effect: its own key (over the outputs up to this step's) and parts.
  let compensation: CompensationModel | undefined;
  const compensateProperty = properties.get('compensate');
  if (compensateProperty !== undefined) {
    const ownShape: VisibleStepShape = { shape: outputShape, when: ownWhen };
    const compensationValues: ValueContext = {
      ...valueContext(false),
      context: functionContext([...earlierNames, name]),
      steps: new Map([...visibleShapes, [name, ownShape]]),
      ownWhen: null,
      ownStep: name,
    };
    const read = readCompensation(
      program,
      analyzer,
      { name, kind, visible: [...earlierNames, name] },
      compensateProperty,
      malformed,
      compensationValues,
    );
    if (read === null) return null;
    compensation = read.model;
    parts.push(...read.parts);
  }

  const others: StepFunctionModel[] = [];
  for (const [part, fn] of functions) if (part !== 'key') others.push({ part, ...fn });
  const model: StepModel = {
    name,
    kind,
    position,
    idempotentByKey,
    location: program.location(method),
    key: functions.get('key') ?? null,
    functions: others,
    conditional: functions.has('when'),
    ...(wait === undefined ? {} : { wait }),
    ...(fanOut === undefined ? {} : { fanOut }),
    ...(queue === undefined ? {} : { queue }),
    hasRequest: properties.has('request'),
    hasRetry: properties.has('retry'),
    performTimeoutText: initializerText(properties.get('performTimeoutMs')),
    ...(compensation === undefined ? {} : { compensation }),
    ...(outputShape.kind === 'unknown' ? {} : { outputShape }),
  };
  return { model, parts };
}

/** An earlier step as the value analysis of a later function sees it. */
function visibleShape(step: StepModel): VisibleStepShape {
  return {
    shape: step.outputShape ?? { kind: 'unknown' },
    when: step.functions.find((f) => f.part === 'when')?.text ?? null,
  };
}

/** What a step of `kind` must declare besides its key (LF001 asks for that): null when nothing is missing. */
function missingFunction(
  kind: StepKind,
  name: string,
  functions: ReadonlyMap<ConfigFunctionPart, FunctionModel>,
): string | null {
  switch (kind) {
    case 'sleep':
      return functions.has('for') === functions.has('until')
        ? `sleep step "${name}" needs exactly one of for: ({ input, steps }) => milliseconds (how long) or until: ({ input, steps }) => Date (when to wake up).`
        : null;
    case 'child':
      return functions.has('childInput')
        ? null
        : `child step "${name}" needs input: ({ input, steps }) => ({ ... }), the child's start input.`;
    case 'forEach':
      if (!functions.has('items'))
        return `forEach step "${name}" needs items: ({ input, steps }) => [...], the list to start one child per item of.`;
      return functions.has('childInput')
        ? null
        : `forEach step "${name}" needs input: ({ item }) => ({ ... }), each child's start input.`;
    case 'step':
    case 'transactional':
    case 'external':
    case 'waitFor':
      return null;
  }
}
