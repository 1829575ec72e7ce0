import { sql, type Kysely, type Selectable } from 'kysely';
import { z } from 'zod';
import { checkOptions, integer, rule } from '../../dsl/option-checks.js';
import type { QueueLimits } from '../../dsl/queue.js';
import { QueueNotFoundError } from '../errors.js';
import { invalidOption } from './invalid-option.js';
import type { LedgerflowDatabase, QueueTable } from '../store/tables.js';

/** A registered queue as `client.listQueues()` and `ledgerflow queues` show it. */
export interface QueueSummary {
  readonly name: string;
  /** As the last worker that registered the queue declared them. */
  readonly limits: QueueLimits;
  /** Slots held now, across all workers (step attempts running, whole runs in progress). */
  readonly inFlight: number;
  /** Places in line: runs `waiting` for a slot of this queue. */
  readonly waiting: number;
  /** How many partitions have runs in line (`*`, the partition of uses without `partitionKey`, counts as one). */
  readonly partitionsWaiting: number;
  /** When the run that has been in line longest joined it; null when nobody waits. */
  readonly oldestWaitingSince: Date | null;
  /** A rate limit stopped the last grant while runs were in line: no slot is granted before this (database time). */
  readonly rateLimitedUntil: Date | null;
  /** When a worker last registered the queue (and its limits). */
  readonly registeredAt: Date;
  /** Paused by an operator (`client.pauseQueue`): no slot is granted until it is resumed. */
  readonly paused: boolean;
  /** With `partitions`: the partitions that hold slots or have runs in line (see {@link QueueListOptions.partitions}). */
  readonly partitions?: readonly QueuePartitionSummary[];
  /** With `partitions`: more partitions hold slots or have runs in line than `partitionLimit` listed. */
  readonly morePartitions?: boolean;
}

/** One partition of a queue: its counters and its place in the round-robin. */
export interface QueuePartitionSummary {
  /** The partition key; `*` for the uses of the queue without `partitionKey`. */
  readonly partition: string;
  readonly inFlight: number;
  readonly waiting: number;
  /** The highest priority among its runs in line (it is served before partitions whose highest is lower); null when none waits. */
  readonly topPriority: number | null;
  readonly oldestWaitingSince: Date | null;
  /** When it last got a slot: among partitions of equal priority, the one served longest ago goes first. */
  readonly lastGrantedAt: Date | null;
}

export interface QueueListOptions {
  /** Only this queue; `QueueNotFoundError` if no worker registered it. */
  readonly queue?: string;
  /**
   * Also list partitions: first those with runs in line, in the order the next grants will look
   * at them (highest waiting priority, then served longest ago), then those that only hold slots,
   * by name — at most `partitionLimit` per queue.
   */
  readonly partitions?: boolean;
  /** Partitions listed per queue; default 20, at most 1 000. */
  readonly partitionLimit?: number;
}

/** The queue's row and its counters. */
interface QueueRow extends Selectable<QueueTable> {
  in_flight: number;
  rate_limited_until: Date | null;
  partitions_waiting: number;
  waiting: number;
  oldest_waiting_at: Date | null;
}

interface PartitionRow {
  partition: string;
  in_flight: number;
  waiting: number;
  top_priority: number | null;
  last_granted_at: Date | null;
  oldest_waiting_at: Date | null;
}

/*
 * Every number here comes from the counters `queue_grant` keeps (plus the uncounted slots of the
 * fast path) (`queue_partition`: in flight and
 * in line per partition, the queue's own row partition ''), read through indexes: the partitions
 * with runs in line come from the grant's own turn index, so the work is per partition in line,
 * never per run in line. The oldest run in line of a partition is found in the waiter index
 * (queue, partition, priority DESC, enqueued_at) one priority at a time: the first entry of each
 * priority is its oldest, so it costs one index descent per distinct priority, not a scan.
 */

/**
 * Slots taken on the fast path (core 0022: no counter is written for them): added to the counters'
 * `in_flight`, through the partial index of those slots (few while nobody waits; folded into the
 * counters by the next ask that goes to the line).
 */
const UNCOUNTED = sql`SELECT count(*)::int FROM ledgerflow.queue_slot s WHERE NOT s.counted`;

/** The oldest place in line of partition `p` (a row of queue_partition in scope): a skip scan over its priorities. */
const OLDEST_IN_PARTITION = sql`
  SELECT min(level.enqueued_at) AS oldest_waiting_at FROM (
    WITH RECURSIVE level (priority, enqueued_at) AS (
      (SELECT x.priority, x.enqueued_at FROM ledgerflow.queue_waiter x
        WHERE x.queue = p.queue AND x.partition = p.partition
        ORDER BY x.priority DESC, x.enqueued_at LIMIT 1)
      UNION ALL
      SELECT next.priority, next.enqueued_at FROM level
       CROSS JOIN LATERAL (
         SELECT x.priority, x.enqueued_at FROM ledgerflow.queue_waiter x
          WHERE x.queue = p.queue AND x.partition = p.partition AND x.priority < level.priority
          ORDER BY x.priority DESC, x.enqueued_at LIMIT 1) next
    )
    SELECT enqueued_at FROM level) level`;

/** Registered queues by name, with their counters (and partitions, when asked). */
export async function listQueues(
  db: Kysely<LedgerflowDatabase>,
  options: QueueListOptions = {},
): Promise<QueueSummary[]> {
  checkOptions(queueListOptionsSchema, options, invalidOption);
  const partitionLimit = options.partitionLimit ?? 20;
  const only = options.queue ?? null;
  const { rows } = await sql<QueueRow>`
    SELECT q.name, q.concurrency, q.rate_limit, q.rate_period_ms, q.partition_concurrency, q.partition_rate_limit,
           q.partition_rate_period_ms, q.updated_at, q.paused,
           coalesce(g.in_flight, 0) + (${UNCOUNTED} AND s.queue = q.name) AS in_flight,
           CASE WHEN g.next_token_at > statement_timestamp() AND w.waiting > 0 THEN g.next_token_at END AS rate_limited_until,
           w.partitions_waiting, w.waiting, w.oldest_waiting_at
      FROM ledgerflow.queue q
      LEFT JOIN ledgerflow.queue_partition g ON g.queue = q.name AND g.partition = ''
     CROSS JOIN LATERAL (
           SELECT count(*)::int AS partitions_waiting, coalesce(sum(p.waiting), 0)::int AS waiting, min(o.oldest_waiting_at) AS oldest_waiting_at
             FROM ledgerflow.queue_partition p
            CROSS JOIN LATERAL (${OLDEST_IN_PARTITION}) o
            WHERE p.queue = q.name AND p.waiting > 0 AND p.partition <> '') w
     WHERE ${only}::text IS NULL OR q.name = ${only}
     ORDER BY q.name`.execute(db);
  if (only !== null && rows.length === 0) {
    throw new QueueNotFoundError(
      `No queue "${only}" is registered in this database. Queues are registered by the workers that serve workflows using them; ` +
        '`ledgerflow queues` lists those that are.',
    );
  }
  const summaries: QueueSummary[] = [];
  for (const row of rows) {
    const summary = toSummary(row);
    if (options.partitions !== true) {
      summaries.push(summary);
      continue;
    }
    const listed = await listPartitions(db, row.name, partitionLimit);
    summaries.push({ ...summary, ...listed });
  }
  return summaries;
}

/** Partitions with runs in line in turn order (the grant's index), then partitions that only hold slots, by name. */
async function listPartitions(
  db: Kysely<LedgerflowDatabase>,
  queue: string,
  limit: number,
): Promise<{ partitions: QueuePartitionSummary[]; morePartitions: boolean }> {
  const { rows: inLine } = await sql<PartitionRow>`
    SELECT p.partition, p.in_flight + (${UNCOUNTED} AND s.queue = p.queue AND s.partition = p.partition) AS in_flight,
           p.waiting, p.top_priority, p.last_granted_at, o.oldest_waiting_at
      FROM (SELECT * FROM ledgerflow.queue_partition
             WHERE queue = ${queue} AND waiting > 0 AND partition <> ''
             ORDER BY top_priority DESC, last_granted_at NULLS FIRST
             LIMIT ${limit + 1}) p
     CROSS JOIN LATERAL (${OLDEST_IN_PARTITION}) o
     ORDER BY p.top_priority DESC, p.last_granted_at NULLS FIRST`.execute(db);
  let holding: PartitionRow[] = [];
  // One more than fits, on either side, says whether more partitions are left off.
  if (inLine.length <= limit) {
    ({ rows: holding } = await sql<PartitionRow>`
      SELECT * FROM (
        SELECT p.partition, p.in_flight + (${UNCOUNTED} AND s.queue = p.queue AND s.partition = p.partition) AS in_flight,
               p.waiting, p.top_priority, p.last_granted_at, NULL::timestamptz AS oldest_waiting_at
          FROM ledgerflow.queue_partition p
         WHERE p.queue = ${queue} AND p.partition <> '' AND p.waiting = 0) p
       WHERE in_flight > 0
       ORDER BY partition
       LIMIT ${limit - inLine.length + 1}`.execute(db));
  }
  const all = [...inLine, ...holding];
  return { partitions: all.slice(0, limit).map(toPartitionSummary), morePartitions: all.length > limit };
}

function toSummary(row: QueueRow): QueueSummary {
  const limits: { -readonly [K in keyof QueueLimits]: QueueLimits[K] } = {};
  if (row.concurrency !== null) limits.concurrency = row.concurrency;
  if (row.rate_limit !== null && row.rate_period_ms !== null)
    limits.rateLimit = { limit: row.rate_limit, periodMs: row.rate_period_ms };
  if (row.partition_concurrency !== null || row.partition_rate_limit !== null) {
    limits.partition = {
      ...(row.partition_concurrency !== null ? { concurrency: row.partition_concurrency } : {}),
      ...(row.partition_rate_limit !== null && row.partition_rate_period_ms !== null
        ? { rateLimit: { limit: row.partition_rate_limit, periodMs: row.partition_rate_period_ms } }
        : {}),
    };
  }
  return {
    name: row.name,
    limits,
    inFlight: row.in_flight,
    waiting: row.waiting,
    partitionsWaiting: row.partitions_waiting,
    oldestWaitingSince: row.oldest_waiting_at,
    rateLimitedUntil: row.rate_limited_until,
    registeredAt: row.updated_at,
    paused: row.paused,
  };
}

function toPartitionSummary(row: PartitionRow): QueuePartitionSummary {
  return {
    partition: row.partition,
    inFlight: row.in_flight,
    waiting: row.waiting,
    topPriority: row.waiting > 0 ? row.top_priority : null,
    oldestWaitingSince: row.oldest_waiting_at,
    lastGrantedAt: row.last_granted_at,
  };
}

/** What {@link QueueListOptions} allow. */
const queueListOptionsSchema = z.object({
  partitionLimit: rule(integer().min(1).max(1_000), 'must be an integer from 1 to 1000').optional(),
});
