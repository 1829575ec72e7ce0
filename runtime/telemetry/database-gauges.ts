/**
 * Gauges read from the database: runs waiting per queue, open intents, the oldest open intent's
 * age. Observable instruments with ONE batch callback, so the SDK's metric reader triggers one
 * read per collection; nothing is read unless a reader collects (no SDK: the API's meter never
 * calls back). Reads that overlap or come within {@link MIN_READ_INTERVAL_MS} of the last one
 * (several readers) share it. Each read is one statement over existing indexes:
 *
 *   queue depth      `queue_partition_turn_idx` (partial: partitions with waiters) grouped by
 *                    queue, joined to the few rows of `ledgerflow.queue` (queues without
 *                    waiters report 0);
 *   open intents     `step_effect_open_intent_idx` (partial: status = 'intent'); its count and
 *                    the minimum `intent_at` cost one entry per open intent — intents are open
 *                    only while their call is in flight or unresolved, so they are few.
 *
 * A failed read observes nothing for that collection (the gauges have no point then) and is
 * tried again at the next one.
 */

import { sql, type Kysely } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';
import { ATTR, METRIC } from './attributes.js';
import type { OtelBatchObservableCallback, OtelMeter } from './otel-api.js';

export const MIN_READ_INTERVAL_MS = 1_000;

export interface DatabaseGaugeReading {
  readonly queues: ReadonlyArray<{ readonly queue: string; readonly waiting: number }>;
  readonly openIntents: number;
  /** Seconds since the oldest open intent was written; 0 when none is open. */
  readonly oldestIntentAgeSeconds: number;
}

/** The one statement of a gauge read. */
export function databaseGaugesStatement() {
  return sql<{
    queues: Array<{ queue: string; waiting: number }> | null;
    open_intents: number;
    oldest_age: number | null;
  }>`
    SELECT (SELECT jsonb_agg(jsonb_build_object('queue', q.name, 'waiting', COALESCE(w.waiting, 0)) ORDER BY q.name)
              FROM ledgerflow.queue q
              LEFT JOIN (SELECT p.queue, sum(p.waiting)::int AS waiting
                           FROM ledgerflow.queue_partition p
                          WHERE p.waiting > 0 AND p.partition <> ''
                          GROUP BY p.queue) w ON w.queue = q.name) AS queues,
           e.open_intents, e.oldest_age
      FROM (SELECT count(*)::int AS open_intents,
                   EXTRACT(EPOCH FROM statement_timestamp() - min(intent_at))::float8 AS oldest_age
              FROM ledgerflow.step_effect
             WHERE status = 'intent') e`;
}

export async function readDatabaseGauges(db: Kysely<LedgerflowDatabase>): Promise<DatabaseGaugeReading> {
  const { rows } = await databaseGaugesStatement().execute(db);
  const row = rows[0];
  return {
    queues: (row?.queues ?? []).map((q) => ({ queue: q.queue, waiting: Number(q.waiting) })),
    openIntents: Number(row?.open_intents ?? 0),
    oldestIntentAgeSeconds: Math.max(0, Number(row?.oldest_age ?? 0)),
  };
}

/** Registers the gauges on `meter`; returns what removes them (the worker calls it on stop). */
export function observeDatabaseGauges(meter: OtelMeter, db: Kysely<LedgerflowDatabase>): () => void {
  const queueDepth = meter.createObservableGauge(METRIC.queueDepth, {
    description: 'Runs waiting for a slot of the queue',
    unit: '{run}',
  });
  const openIntents = meter.createObservableGauge(METRIC.openIntents, {
    description: 'External calls whose outcome is not recorded yet',
    unit: '{intent}',
  });
  const oldestIntentAge = meter.createObservableGauge(METRIC.oldestIntentAge, {
    description: 'Age of the oldest open intent',
    unit: 's',
  });
  let last: { readonly at: number; readonly reading: Promise<DatabaseGaugeReading | undefined> } | undefined;
  const callback: OtelBatchObservableCallback = async (result) => {
    if (last === undefined || performance.now() - last.at >= MIN_READ_INTERVAL_MS) {
      last = { at: performance.now(), reading: readDatabaseGauges(db).catch(() => undefined) };
    }
    const reading = await last.reading;
    if (reading === undefined) return;
    for (const { queue, waiting } of reading.queues) result.observe(queueDepth, waiting, { [ATTR.queue]: queue });
    result.observe(openIntents, reading.openIntents);
    result.observe(oldestIntentAge, reading.oldestIntentAgeSeconds);
  };
  const observables = [queueDepth, openIntents, oldestIntentAge];
  meter.addBatchObservableCallback(callback, observables);
  return () => meter.removeBatchObservableCallback(callback, observables);
}
