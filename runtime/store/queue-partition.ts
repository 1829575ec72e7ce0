import type { QueueUseDefinition, StepDefinition } from '../../dsl/workflow.js';

/*
 * The partition a queue use without a partition key is counted under. Here, below the worker and
 * the CLI, because it is a stored value: the worker's asks write it (worker/queue-slots.ts), the
 * fast path's SQL tests for it (core 0022), and whatever describes a run waiting in line
 * (worker/wait-commits.ts, the CLI and the dashboard) leaves it out. Beside it, which slots a step
 * asks for and which of them go the fast path: the worker's asks and the claim (which takes such a
 * slot itself, core 0024) read both from here, the claim being below the asks.
 */

/** The partition of a queue use without `partitionKey` ('' is the queue's own counter row). */
export const QUEUE_NO_PARTITION = '*';

/** A slot a step asks for: of `use`'s queue, '' for the whole run's, else the step's name. */
export interface AskedSlot {
  readonly use: QueueUseDefinition;
  readonly step: string;
}

/**
 * The slots `step` asks for before it runs, in the order it asks: its workflow's queue (held by
 * the run from then until it settles) unless the run holds it already, then the step's own.
 */
export function slotsAsked(
  workflowQueue: QueueUseDefinition | undefined,
  step: Pick<StepDefinition, 'name' | 'queue'>,
  runSlotHeld: boolean,
): AskedSlot[] {
  return [
    ...(workflowQueue !== undefined && !runSlotHeld ? [{ use: workflowQueue, step: '' }] : []),
    ...(step.queue !== undefined ? [{ use: step.queue, step: step.name }] : []),
  ];
}

/**
 * Whether a use takes its slot on the fast path (core 0022): a queue limited by concurrency alone,
 * used without a partition key. Rate windows and partition turns are kept under the queue's
 * exclusive lock, so those uses always ask the slow way.
 */
export function onFastPath(use: QueueUseDefinition): boolean {
  const limits = use.queue.limits;
  return use.partitionKey === undefined && limits.rateLimit === undefined && limits.partition === undefined;
}
