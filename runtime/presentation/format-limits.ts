import type { QueueLimits, RateLimit } from '../../dsl/queue.js';

/*
 * A queue's limits in words. Here, not in the CLI's `queues` command, because the dashboard's
 * queues page prints them the same way (dashboard/views/queues-view.ts).
 */

/** `2 at once, 50 per 1s; per partition: 1 at once`, or `none`. */
export function formatLimits(limits: QueueLimits): string {
  const own = describeLimits(limits.concurrency, limits.rateLimit);
  const partition =
    limits.partition === undefined ? '' : describeLimits(limits.partition.concurrency, limits.partition.rateLimit);
  if (own === '' && partition === '') return 'none';
  if (partition === '') return own;
  return own === '' ? `per partition: ${partition}` : `${own}; per partition: ${partition}`;
}

function describeLimits(concurrency: number | undefined, rate: RateLimit | undefined): string {
  return [
    concurrency !== undefined ? `${concurrency} at once` : '',
    rate !== undefined ? `${rate.limit} per ${formatPeriod(rate.periodMs)}` : '',
  ]
    .filter((part) => part !== '')
    .join(', ');
}

function formatPeriod(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}min`;
  if (ms % 1_000 === 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}
