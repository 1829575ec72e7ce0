// What a run in flight depends on, as the manifest pins it per workflow version. Two kinds of pin:
//
// - the shape — step names, kinds, order, `idempotentByKey`, which steps have a condition, the
//   event each `waitFor` waits for, the child workflow version each `child`/`forEach` starts and
//   the name of the queue the workflow's runs or a step's attempts hold a slot of — pinned by
//   `definitionHash`
//   (dsl/workflow-shape.ts, which the runtime stores too) and the manifest's step list;
// - the parts below, each pinned by the hash of its source text (comments and formatting aside,
//   together with every declaration it uses; codegen/analysis/pinned-source.ts).
//
// A step's compensation (`compensate`) is pinned both ways too: its name and `idempotentByKey`
// (and the workflow's `compensateOnCancel`) are in the shape; its output schema, key and request
// are parts under its own name (`steps.refundCharge.key`), which is unique among steps and
// compensations (LF006).
//
// LF007 fails on any change to either: no change counts as compatible, because codegen compares
// source, not meaning (it cannot prove two zod schemas or two functions equivalent). What is not
// pinned on purpose: `retry`, the handler time limits (`timeoutMs` of `step` and `transactional`,
// `performTimeoutMs`), which are read per attempt (an intent stores its own horizon); the
// workflow's `timeoutMs`, which a run takes when it starts; the handlers, which are not part of
// the declaration; the child workflow a step starts beyond its name and version, which its own
// manifest entry pins; and a queue's limits (its `queue('name', { ... })` declaration beyond the
// name), which are settings of the queue, not of a version: workers write them to the queue's row
// and refuse two declarations of one queue that differ, and a raised limit is meant to free slots
// for the runs already in line — pinned per version, every tuning would be LF007, on old versions
// that must stay declared too.

import type { StepKind } from '../../dsl/step-kind.js';
import type { SourceLocation } from './source-location.js';

/**
 * Functions the runtime evaluates for a step, by part kind. A new construct the runtime evaluates
 * is added here, with its property, the step kinds that have it and its description below:
 * analysis then reads it (and checks it like a key), the manifest pins
 * it and LF007 names it. `childInput` is the `input` of a `child` or `forEach` step.
 */
export const STEP_FUNCTION_PARTS = ['key', 'request', 'when', 'for', 'until', 'match', 'items', 'childInput'] as const;
export type StepFunctionPart = (typeof STEP_FUNCTION_PARTS)[number];

/**
 * The functions codegen proves pure over their context, as it does keys (LF002–LF004): every
 * function the runtime evaluates for a step — `request` too, whose hash the ledger compares on
 * every attempt (a request that read the clock would meet its own ledger row as a conflict) —
 * and a queue use's partition key (QUEUE_PARTS).
 */
export type CheckedFunctionPart = StepFunctionPart | 'partitionKey';

export function isCheckedFunctionPart(part: PartKind): part is CheckedFunctionPart {
  return part === 'partitionKey' || (STEP_FUNCTION_PARTS as readonly string[]).includes(part);
}

/**
 * Values a step declares that change what a run in flight does, pinned by their source like the
 * functions: the event a `waitFor` waits for (its declaration, payload schema included), how long
 * it waits, and how many children a `forEach` keeps unfinished at once.
 */
export const STEP_VALUE_PARTS = ['event', 'timeoutMs', 'concurrency'] as const;

/** The parts a step's config declares by a property of its own: output, functions, values. */
export const STEP_CONFIG_PART_KINDS = ['output', ...STEP_FUNCTION_PARTS, ...STEP_VALUE_PARTS] as const;
export type StepConfigPartKind = (typeof STEP_CONFIG_PART_KINDS)[number];

/**
 * The pinned parts of a queue use — `queue: { queue, partitionKey }` on the workflow (its runs
 * hold a slot) or on a `step`, `transactional` or `external` step (each attempt holds one): the
 * partition key, a function the runtime evaluates for the step or the run, checked like a key. The
 * queue's name is in the shape; its limits are not pinned (see the header).
 */
export const QUEUE_PARTS = ['partitionKey'] as const;
export type QueuePart = (typeof QUEUE_PARTS)[number];

/** The step kinds whose attempts can hold a queue's slot (the built-in kinds cannot). */
export const QUEUED_STEP_KINDS: readonly StepKind[] = ['step', 'transactional', 'external'];

/** Every kind of part a step can have, in the order messages list them (output, functions, values, queue use). */
export const STEP_PART_KINDS = [...STEP_CONFIG_PART_KINDS, ...QUEUE_PARTS] as const;
export type StepPartKind = (typeof STEP_PART_KINDS)[number];

/** Every kind of pinned part: the workflow's input schema, then the step parts. */
export const PART_KINDS = ['input', ...STEP_PART_KINDS] as const;
export type PartKind = (typeof PART_KINDS)[number];

/** The parts of the workflow itself (a pinned part with step null): its input schema and its queue use. */
export const WORKFLOW_PART_KINDS = ['input', ...QUEUE_PARTS] as const;
export type WorkflowPartKind = (typeof WORKFLOW_PART_KINDS)[number];

/** The config property that declares each step part: its own name, but for `childInput`. */
export const STEP_PART_PROPERTIES: Readonly<Record<StepConfigPartKind, string>> = {
  output: 'output',
  key: 'key',
  request: 'request',
  when: 'when',
  for: 'for',
  until: 'until',
  match: 'match',
  items: 'items',
  childInput: 'input',
  event: 'event',
  timeoutMs: 'timeoutMs',
  concurrency: 'concurrency',
};

/**
 * The parts each step kind's config declares by a property of its own (the queue parts of
 * QUEUED_STEP_KINDS are the queue use's). A property of the same name elsewhere is not a part:
 * `timeoutMs` of a `step` is its handler's time limit, read per attempt; only a `waitFor`'s is
 * pinned. The built-in kinds have no `output` property (the runtime knows their output).
 */
export const STEP_PARTS_BY_KIND: Readonly<Record<StepKind, readonly StepConfigPartKind[]>> = {
  step: ['output', 'when'],
  transactional: ['output', 'key', 'request', 'when'],
  external: ['output', 'key', 'request', 'when'],
  sleep: ['when', 'for', 'until'],
  waitFor: ['when', 'match', 'event', 'timeoutMs'],
  child: ['key', 'when', 'childInput'],
  forEach: ['key', 'when', 'items', 'childInput', 'concurrency'],
};

/**
 * Part kinds that exist only on what the shape itself records — a condition, a sleep, waitFor,
 * child or forEach step, or a queue use. A manifest entry written before they existed had none of
 * them (its definition hash tells if one was added since), so an entry that does not list them
 * lacks nothing: no note says they are pinned for the first time.
 */
export const SHAPE_BOUND_PART_KINDS: readonly PartKind[] = [
  'when',
  'for',
  'until',
  'match',
  'items',
  'childInput',
  'event',
  'timeoutMs',
  'concurrency',
  'partitionKey',
];

/**
 * The part kinds a manifest entry pins: every kind, but the partition key only for a version that
 * uses a queue — so that the entry of a version without one reads as it did before queues existed
 * (a queue added later changes its definition hash, which LF007 reports as a shape change).
 */
export function pinnedPartKinds(usesQueue: boolean): PartKind[] {
  return PART_KINDS.filter((kind) => usesQueue || !(QUEUE_PARTS as readonly string[]).includes(kind));
}

/** How messages name a part of each kind (`the key` + ` of step "charge"`). */
const PART_NAMES: Readonly<Record<PartKind, string>> = {
  input: 'the input schema',
  output: 'the output schema',
  key: 'the key',
  request: 'the request',
  when: 'the condition (when)',
  for: 'the sleep duration (for)',
  until: 'the wake-up time (until)',
  match: 'the correlation key (match)',
  items: 'the item list (items)',
  childInput: 'the child input (input)',
  event: 'the event declaration',
  timeoutMs: 'the wait timeout (timeoutMs)',
  concurrency: 'the concurrency',
  partitionKey: 'the partition key (partitionKey)',
};

/** How messages name a part of the workflow itself. */
const WORKFLOW_PART_NAMES: Readonly<Record<WorkflowPartKind, string>> = {
  input: 'the input schema',
  partitionKey: "the partition key (partitionKey) of the workflow's queue",
};

/** How notes name all parts of a kind at once. */
const PART_KIND_PLURALS: Readonly<Record<PartKind, string>> = {
  input: 'the input schema',
  output: 'output schemas',
  key: 'keys',
  request: 'requests',
  when: 'conditions',
  for: 'sleep durations',
  until: 'wake-up times',
  match: 'correlation keys',
  items: 'item lists',
  childInput: 'child inputs',
  event: 'event declarations',
  timeoutMs: 'wait timeouts',
  concurrency: 'concurrency limits',
  partitionKey: 'partition keys',
};

/** One pinned part of a workflow version, as analysis found it. */
export interface PinnedPart {
  readonly kind: PartKind;
  /** The step the part belongs to; null for the workflow's own parts (WORKFLOW_PART_KINDS). */
  readonly step: string | null;
  /** sha256 of the normalized source with the declarations it uses, first 16 hex digits. */
  readonly hash: string;
  /** The property that declares it. */
  readonly location: SourceLocation;
  /**
   * Where the declarations pinned with it are (the helpers and constants it uses, transitively),
   * sorted: where LF007 points when the part's own text is unchanged. Absent in hand-built models.
   */
  readonly uses?: readonly SourceLocation[];
}

/** The part's key in the manifest: `input` (or another workflow part kind), `steps.<step>.<kind>` (`steps.charge.key`). */
export function partId(part: Pick<PinnedPart, 'kind' | 'step'>): string {
  return part.step === null ? part.kind : `steps.${part.step}.${part.kind}`;
}

/** Inverse of partId for the kinds this release knows; null for anything else. */
export function parsePartId(id: string): Pick<PinnedPart, 'kind' | 'step'> | null {
  if (isWorkflowPartKind(id)) return { kind: id, step: null };
  const match = /^steps\.([^.]+)\.([^.]+)$/.exec(id);
  const kind = match?.[2];
  if (match === null || kind === undefined || !(STEP_PART_KINDS as readonly string[]).includes(kind)) return null;
  return { kind: kind as StepPartKind, step: match[1]! };
}

export function isWorkflowPartKind(kind: string): kind is WorkflowPartKind {
  return (WORKFLOW_PART_KINDS as readonly string[]).includes(kind);
}

/**
 * `the input schema`, `the output schema of step "charge"`, `the key of step "charge"`; with
 * `compensates`, the part is of a compensation: `the key of compensation "refund" (of step "charge")`.
 */
export function describePart(part: Pick<PinnedPart, 'kind' | 'step'>, compensates?: string): string {
  if (part.step !== null && compensates !== undefined)
    return `${PART_NAMES[part.kind]} of compensation "${part.step}" (of step "${compensates}")`;
  if (part.step !== null) return `${PART_NAMES[part.kind]} of step "${part.step}"`;
  return isWorkflowPartKind(part.kind) ? WORKFLOW_PART_NAMES[part.kind] : PART_NAMES[part.kind];
}

/** `the input schema, output schemas and keys`. */
export function describePartKinds(kinds: readonly PartKind[]): string {
  const names = PART_KINDS.filter((k) => kinds.includes(k)).map((k) => PART_KIND_PLURALS[k]);
  return names.length <= 1 ? (names[0] ?? '') : `${names.slice(0, -1).join(', ')} and ${names.at(-1)!}`;
}

/** `the partition key of queue "email" of step "send"`, or `… of workflow "orders"` for the queue its runs hold. */
export function describePartitionKey(
  queue: string,
  holder: { readonly step: string | null; readonly workflow: string },
): string {
  return `the partition key of queue "${queue}" of ${holder.step === null ? `workflow "${holder.workflow}"` : `step "${holder.step}"`}`;
}
