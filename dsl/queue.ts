import { z } from 'zod';
import { checkOptions, integer, rule } from './option-checks.js';

/** A queue name: lower-case letters, digits, `.`, `_` and `-`, starting with a letter; at most 63 characters. */
export const QUEUE_NAME = /^[a-z][a-z0-9._-]{0,62}$/;

/** At most `limit` grants per `periodMs` (a token bucket refilled continuously, on database time). */
export interface RateLimit {
  readonly limit: number;
  readonly periodMs: number;
}

export interface PartitionLimits {
  /** At most this many slots held at once per partition (e.g. 1: one run per customer at a time). */
  readonly concurrency?: number;
  readonly rateLimit?: RateLimit;
}

export interface QueueLimits {
  /** At most this many slots held at once in the whole queue, across all workers. */
  readonly concurrency?: number;
  /** At most this many slots granted per period in the whole queue. */
  readonly rateLimit?: RateLimit;
  /** Limits per partition (the partition key is computed per run by `partitionKey`). */
  readonly partition?: PartitionLimits;
}

/**
 * A queue: limits that hold across every worker, kept in the database. A workflow (for its whole
 * run) or a step (for each attempt) names the queue and, optionally, how its partition key is
 * computed. Slots are granted by priority, then round-robin between partitions, so one tenant
 * with 100 000 queued runs does not starve a tenant with 10.
 *
 * @example
 * export const emailQueue = queue('email', { rateLimit: { limit: 10, periodMs: 1_000 }, partition: { concurrency: 1 } });
 */
export interface QueueDefinition {
  readonly name: string;
  readonly limits: QueueLimits;
}

const count = rule(integer().min(1), 'must be an integer >= 1');

const rateLimitSchema = rule(
  z.object({ limit: count.optional(), periodMs: count.optional() }),
  'must be { limit, periodMs }',
);

/** What {@link QueueLimits} allow. */
const queueLimitsSchema = z.object({
  concurrency: count.optional(),
  rateLimit: rateLimitSchema.optional(),
  partition: rule(
    z.object({ concurrency: count.optional(), rateLimit: rateLimitSchema.optional() }),
    'must be { concurrency, rateLimit }',
  ).optional(),
});

export function queue(name: string, limits: QueueLimits = {}): QueueDefinition {
  if (!QUEUE_NAME.test(name)) {
    throw new TypeError(
      `Invalid queue name "${name}": use lower-case letters, digits, ".", "_" and "-", starting with a letter (max 63).`,
    );
  }
  checkOptions(
    queueLimitsSchema,
    limits,
    (problems) => new TypeError(`Invalid limits for queue "${name}": ${problems.join('; ')}.`),
  );
  return Object.freeze({ name, limits: Object.freeze({ ...limits }) });
}
