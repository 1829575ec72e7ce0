/*
 * The partition a queue use without a partition key is counted under. Here, below the worker and
 * the CLI, because it is a stored value: the worker's asks write it (worker/queue-slots.ts), the
 * fast path's SQL tests for it (core 0022), and whatever describes a run waiting in line
 * (worker/wait-commits.ts, the CLI and the dashboard) leaves it out.
 */

/** The partition of a queue use without `partitionKey` ('' is the queue's own counter row). */
export const QUEUE_NO_PARTITION = '*';
