// The plain-data model between analysis and everything after it. No compiler objects: the
// validator and the emitters run on these records alone (and tests build them by hand).

import type { StepKind } from '../../dsl/step-kind.js';
import type { HandlerAnalysis } from './handler-model.js';
import type { KeyValueFindings, ValueShape } from './key-values.js';
import type { CheckedFunctionPart, PinnedPart } from './pinned-parts.js';
import type { PurityFinding, StepRead } from './purity.js';
import type { SourceLocation } from './source-location.js';
import type { SuppressionComment } from './suppression.js';

export type { MutableReadReason, NondeterministicSource, StepRead, ViaHop } from './purity.js';

/** One workflow version as declared: `export const x = workflow(name, { version, ... }).step(...)...`. */
export interface WorkflowModel {
  readonly name: string;
  readonly version: number;
  /** Name under which the source module exports the workflow const. */
  readonly exportName: string;
  /** Source file, relative to the codegen root, forward slashes. */
  readonly file: string;
  /** The `workflow(...)` call. */
  readonly location: SourceLocation;
  /** The `version` property, where LF007 points. */
  readonly versionLocation: SourceLocation;
  readonly steps: readonly StepModel[];
  /** The queue each run holds a slot of from its first step until it finishes (its name is part of the shape). */
  readonly queue?: QueueUseModel;
  /** `compensateOnCancel: true`: a cancel that does not say compensates (part of the shape). */
  readonly compensateOnCancel?: true;
  /**
   * What runs in flight depend on besides the shape (codegen/model/pinned-parts.ts): the input
   * schema, the partition key of the workflow's queue, each step's output schema, the functions
   * the runtime evaluates for it, the values that steer a wait or a fan-out and the partition key
   * of its queue, each with the hash of its normalized source; the workflow's own parts first,
   * then per step in step order.
   */
  readonly parts: readonly PinnedPart[];
}

export interface StepModel {
  readonly name: string;
  readonly kind: StepKind;
  readonly position: number;
  readonly idempotentByKey: boolean;
  /** The step method's name in this step's call (`.step`, `.waitFor`, `.forEach`, ...). */
  readonly location: SourceLocation;
  /**
   * `null` when the step declares no key (correct for `step`, `sleep` and `waitFor`; LF001 for
   * `transactional`, `external`, `child` and `forEach`). A `forEach` key is per item.
   */
  readonly key: KeyModel | null;
  /**
   * The other functions the runtime evaluates for the step that codegen checks like a key: its
   * condition (`when`), a sleep's `for` or `until`, a wait's `match`, a fan-out's `items` and
   * child `input`; in the order of STEP_FUNCTION_PARTS.
   */
  readonly functions: readonly StepFunctionModel[];
  /** The step has a `when` condition: part of its shape (dsl `StepShape.conditional`). */
  readonly conditional: boolean;
  /** `waitFor` only: the event it waits for (its name is part of the shape). */
  readonly wait?: WaitModel;
  /** `child` and `forEach` only: the workflow version it starts (its name and version are part of the shape). */
  readonly fanOut?: FanOutModel;
  /** `step`, `transactional` and `external` only: the queue each attempt holds a slot of (its name is part of the shape). */
  readonly queue?: QueueUseModel;
  readonly hasRequest: boolean;
  readonly hasRetry: boolean;
  /** Source text of `performTimeoutMs`, when declared. */
  readonly performTimeoutText: string | null;
  /** `transactional` and `external` only: the effect that undoes this step's (`compensate`); its name and `idempotentByKey` are part of the shape. */
  readonly compensation?: CompensationModel;
  /** The shape of its output as its schema declares it (the value analysis reads later steps' keys with it); absent: unknown. */
  readonly outputShape?: ValueShape;
}

/**
 * A step's `compensate`: an effect of the step's kind with its own name (its handler in the
 * contract, its ledger rows), key and output. Its functions see the outputs of the steps up to and
 * including the one it compensates. Its `position` is the one its `workflow_step_def` row takes:
 * after the steps, in the order compensations run (the last declared step's first).
 */
export interface CompensationModel extends Omit<StepModel, 'compensation'> {
  /** The step whose effect it undoes. */
  readonly compensates: string;
}

/** The compensations of a workflow, in the order they run (dsl `Workflow.compensations`). */
export function compensationsOf(workflow: Pick<WorkflowModel, 'steps'>): CompensationModel[] {
  return workflow.steps
    .flatMap((step) => (step.compensation === undefined ? [] : [step.compensation]))
    .sort((a, b) => a.position - b.position);
}

/** Every step and compensation that takes a handler of its own or is checked like one: the steps, then the compensations. */
export function stepsAndCompensations(workflow: Pick<WorkflowModel, 'steps'>): Array<StepModel | CompensationModel> {
  return [...workflow.steps, ...compensationsOf(workflow)];
}

/** The steps whose outputs a step's functions and handler see: those before it; for a compensation, up to and including the step it undoes. */
export function visibleSteps(workflow: Pick<WorkflowModel, 'steps'>, step: StepModel | CompensationModel): StepModel[] {
  if ('compensates' in step) {
    const undone = workflow.steps.findIndex((s) => s.name === step.compensates);
    return workflow.steps.slice(0, undone + 1);
  }
  return workflow.steps.filter((s) => s.position < step.position);
}

/** What analysis found out about one function the runtime evaluates for a step: a key, a condition, ... */
export interface FunctionModel {
  /** Source text of the function (or the name of the function it refers to). */
  readonly text: string;
  /** The property that declares it. */
  readonly location: SourceLocation;
  /** Input fields it reads, as dotted paths (`customer.id`), sorted. */
  readonly inputFields: readonly string[];
  /** It reads the whole input (or the whole context) rather than named fields. */
  readonly readsWholeInput: boolean;
  /** It reads the whole `steps` object rather than named steps. */
  readonly readsAllSteps: boolean;
  /** Every `steps.<name>` read, in source order. */
  readonly stepReads: readonly StepRead[];
  /** It reads `item` (or the whole context); only a `forEach` step's key and input have one. */
  readonly readsItem: boolean;
  /** Functions it calls that are known pure (of the standard library, and same-project helpers it followed), sorted. */
  readonly calls: readonly string[];
  /** It reads its context at all; a key that does not is the same for every run (LF005). */
  readonly dependsOnContext: boolean;
  /** Everything that makes it impure or unanalysable; validation turns these into diagnostics. */
  readonly findings: readonly KeyFinding[];
  /** What it turns into text and which conditional steps it reads (LF016, LF017); absent where not analysed. */
  readonly values?: KeyValueFindings;
}

/** What analysis found out about one key function. */
export interface KeyModel extends FunctionModel {
  /**
   * The key's value as literal text and context paths, adjacent literals merged (analysis/key-value.ts):
   * how LF014 tells two spellings of one key. null when the key is built of anything else
   * (a call other than `String` or `join`, a conditional, a local); absent in hand-built models.
   */
  readonly value?: readonly KeySegment[] | null;
}

/** A piece of a key's value: literal text, or a path into the context (`input.orderId`, `steps.load.id`). */
export type KeySegment = { readonly literal: string } | { readonly path: string };

/** A function besides the key (and a queue use's partition key) that the runtime evaluates for a step, and which one it is. */
export interface StepFunctionModel extends FunctionModel {
  readonly part: Exclude<CheckedFunctionPart, 'key' | 'partitionKey'>;
}

/** A `waitFor` step's event. Its correlation key is the step's `match` function; without one it waits for a signal to its run. */
export interface WaitModel {
  readonly event: EventReference;
  /** Source text of `timeoutMs`; null when the step waits without a limit. */
  readonly timeoutText: string | null;
}

/** An event declared with `export const x = event('name', schema)`, as a step refers to it. */
export interface EventReference {
  readonly name: string;
  /** The const's exported name in the module that declares it. */
  readonly exportName: string;
  /** That module, relative to the codegen root, forward slashes. */
  readonly file: string;
  /** The `event(...)` call. */
  readonly location: SourceLocation;
}

/** What a `child` or `forEach` step starts. */
export interface FanOutModel {
  readonly workflow: WorkflowReference;
  /** `forEach`: source text of `concurrency`; null when every child may run at once (and for `child`). */
  readonly concurrencyText: string | null;
}

/** A workflow version another workflow starts as its child, as declared in its own workflow file. */
export interface WorkflowReference {
  readonly name: string;
  readonly version: number;
  readonly exportName: string;
  /** The file that declares it, relative to the codegen root. */
  readonly file: string;
}

/**
 * `queue: { queue, partitionKey }` on a workflow (each run holds a slot from its first step until
 * it finishes) or on a `step`, `transactional` or `external` step (each attempt holds one).
 */
export interface QueueUseModel {
  readonly queue: QueueReference;
  /** The function that computes the partition, checked like a key; null when every run is in one partition. */
  readonly partitionKey: FunctionModel | null;
  /** The `queue` property of the workflow options or the step config. */
  readonly location: SourceLocation;
}

/** A queue declared with `export const x = queue('name', { ... })`, as a workflow or a step refers to it. */
export interface QueueReference {
  readonly name: string;
  /** The const's exported name in the module that declares it. */
  readonly exportName: string;
  /** That module, relative to the codegen root, forward slashes. */
  readonly file: string;
  /** The `queue(...)` call. */
  readonly location: SourceLocation;
  /** Source text of the limits (the second argument) as declared; null when it declares none. */
  readonly limitsText: string | null;
}

/** What the purity analysis finds in a key (or another checked function); the rules LF002–LF004 turn these into diagnostics. */
export type KeyFinding = PurityFinding;

/** A declaration codegen cannot read statically (LF008); analysis reports it instead of guessing. */
export interface MalformedDeclaration {
  readonly location: SourceLocation;
  readonly message: string;
  /**
   * The workflow version the declaration is of, as far as codegen could read it (version null:
   * not read); undefined when not even its name could be read.
   */
  readonly workflow?: { readonly name: string; readonly version: number | null };
}

/** Output of the analysis stage. */
/**
 * A `schedule('name', { cron, workflow, input, ... })` declaration, as far as codegen checks it:
 * its `input` runs in a worker on each tick, so it is checked like a key, over `({ scheduledAt })`.
 * Nothing of it is pinned: a worker registers a schedule's current definition (its hash) itself.
 */
export interface ScheduleModel {
  readonly name: string;
  /** The `schedule(...)` call. */
  readonly location: SourceLocation;
  /** The `input` function; null when codegen could not read it (reported as malformed). */
  readonly input: FunctionModel | null;
}

export interface AnalysisResult {
  /** Every file that was analysed, relative to the root, sorted. */
  readonly files: readonly string[];
  readonly workflows: readonly WorkflowModel[];
  /** The schedules declared in the workflow files and the schedule modules, in source order. */
  readonly schedules: readonly ScheduleModel[];
  readonly malformed: readonly MalformedDeclaration[];
  /**
   * The `// ledgerflow-ignore LFnnn: reason` comments in the files analysed (workflow files and
   * the modules they import), sorted; absent in a model built without sources (tests).
   */
  readonly suppressionComments?: readonly SuppressionComment[];
  /**
   * The handler modules bound through generated contracts and what their handlers do (the
   * handler rules LF010–LF012 read it); absent when the analysis was not given handler modules
   * to look at.
   */
  readonly handlers?: HandlerAnalysis;
}
