import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { QueueDefinition } from '../../dsl/queue.js';
import type { QueueUseDefinition } from '../../dsl/workflow.js';
import { faultPoint } from '../faults/fault-points.js';
import { prepared } from '../store/prepared.js';
import { onFastPath, QUEUE_NO_PARTITION, slotsAsked } from '../store/queue-partition.js';
import type { LedgerflowDatabase, WaitingFor } from '../store/tables.js';
import type { StepExecution, StepOutcome } from './executors/step-execution.js';
import { commitKnowingOutcome, keyContext } from './executors/step-execution.js';
import type { WorkflowRegistry } from './registry.js';
import { leaseLost, type Lease } from './lease.js';
import { evaluateStepFunction, StepFailure } from './step-errors.js';
import { suspendRun } from './wait-commits.js';

/*
 * Queue slots (core migration 0004). The limits live in the database: `ledgerflow.queue_grant`
 * is the one place slots are handed out, under the queue row's lock, so no number of workers can
 * hold more than a limit allows. A step (or a whole run) that needs a slot asks for it before it
 * starts; if it gets none it parks `waiting` in the same transaction — so no grant can fall
 * between the ask and the park — and a later grant wakes it.
 */

const MAX_PARTITION_KEY_LENGTH = 200;

/**
 * Writes the queues the registered workflows use, with their limits, so that the database holds
 * them (the last worker to start wins if two disagree), and grants what the limits now allow.
 */
export async function registerQueues(db: Kysely<LedgerflowDatabase>, registry: WorkflowRegistry): Promise<void> {
  const queues = new Map<string, QueueDefinition>();
  for (const workflow of registry.all) {
    const uses = [workflow.registration.workflow.queue, ...workflow.steps.map((s) => s.queue)];
    for (const use of uses) {
      if (use === undefined) continue;
      const known = queues.get(use.queue.name);
      if (known !== undefined && JSON.stringify(known.limits) !== JSON.stringify(use.queue.limits)) {
        throw new TypeError(
          `Queue "${use.queue.name}" is declared twice with different limits; declare each queue once and import it.`,
        );
      }
      queues.set(use.queue.name, use.queue);
    }
  }
  for (const queue of [...queues.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    await registerQueueStatement(queue).execute(db);
    // A raised limit frees slots at once for the runs already in line.
    await sql`SELECT ledgerflow.queue_grant(${queue.name})`.execute(db);
  }
}

export function registerQueueStatement(queue: QueueDefinition): RawBuilder<unknown> {
  const l = queue.limits;
  return sql`
    WITH q AS (
      INSERT INTO ledgerflow.queue (name, concurrency, rate_limit, rate_period_ms, partition_concurrency, partition_rate_limit,
                                    partition_rate_period_ms, updated_at)
      VALUES (${queue.name}, ${l.concurrency ?? null}::int, ${l.rateLimit?.limit ?? null}::int, ${l.rateLimit?.periodMs ?? null}::int,
              ${l.partition?.concurrency ?? null}::int, ${l.partition?.rateLimit?.limit ?? null}::int,
              ${l.partition?.rateLimit?.periodMs ?? null}::int, statement_timestamp())
      ON CONFLICT (name) DO UPDATE
         SET concurrency = EXCLUDED.concurrency, rate_limit = EXCLUDED.rate_limit, rate_period_ms = EXCLUDED.rate_period_ms,
             partition_concurrency = EXCLUDED.partition_concurrency, partition_rate_limit = EXCLUDED.partition_rate_limit,
             partition_rate_period_ms = EXCLUDED.partition_rate_period_ms, updated_at = EXCLUDED.updated_at
      RETURNING name
    )
    INSERT INTO ledgerflow.queue_partition (queue, partition) SELECT name, '' FROM q ON CONFLICT DO NOTHING`;
}

/**
 * Before a step runs: the slots it needs — its workflow's queue (held by the run from its first
 * step until it finishes; `runSlotHeld` when this flight already holds it, which it keeps until
 * the run settles) and its own (held for this attempt) — each asked for and, when not granted,
 * the run parked `waiting` for it. `undefined`: every slot is held, go on.
 *
 * Asking is one statement when a slot is free — on the fast path (core 0022) for a queue limited
 * by concurrency alone, which writes no counter. Only when it is not is the ask repeated, the slow
 * way, in a transaction together with the park: the queue's exclusive lock then keeps any grant
 * from falling between them (a grant wakes only runs that are already `waiting`).
 */
export async function awaitQueueSlots(s: StepExecution, runSlotHeld: boolean): Promise<StepOutcome | undefined> {
  const needed = slotsAsked(s.workflow.registration.workflow.queue, s.step, runSlotHeld);
  const taken = s.run.slotsTaken;
  const takenByClaim = (step: string): boolean =>
    taken !== undefined &&
    taken.position === s.run.currentStep &&
    taken.attempt === s.attempt &&
    taken.slots.includes(step);
  for (const slot of needed) {
    const partition = await partitionOf(s, slot.use);
    const fast = onFastPath(slot.use);
    // The claim took it for this attempt (claim.ts): held already.
    if (fast && takenByClaim(slot.step)) continue;
    const granted = await commitKnowingOutcome(
      s,
      async () => {
        if (fast) {
          const { rows } = await takeFastSlotStatement(slot.use.queue.name, partition, s.lease, slot.step).execute(
            s.db,
          );
          if (rows.length === 0) throw leaseLost(s.lease, 'the queue slot');
          return rows[0]!.taken;
        }
        const { rows } = await acquireSlotStatement(slot.use.queue.name, partition, s.lease, slot.step).execute(s.db);
        if (rows.length === 0) throw leaseLost(s.lease, 'the queue slot');
        return rows[0]!.retry_at === null;
      },
      { retry: true },
    );
    if (granted) continue;
    const outcome = await commitKnowingOutcome(
      s,
      () =>
        s.db.transaction().execute(async (trx) => {
          const { rows } = await acquireSlotStatement(slot.use.queue.name, partition, s.lease, slot.step).execute(trx);
          if (rows.length === 0) throw leaseLost(s.lease, 'the queue wait');
          const retry = rows[0]!.retry_at;
          if (retry === null) return undefined;
          const until = retry instanceof Date && Number.isFinite(retry.getTime()) ? retry : null;
          const waitingFor: WaitingFor = {
            kind: 'queue',
            step: slot.step,
            queue: slot.use.queue.name,
            partition,
            until: until?.toISOString() ?? null,
          };
          const suspended = await suspendRun(trx, {
            lease: s.lease,
            stepName: s.step.name,
            attempt: s.attempt,
            waitingFor,
            until,
          });
          if (!suspended.fenced) throw leaseLost(s.lease, 'the queue wait');
          return { kind: 'suspended' as const, waitingFor, due: suspended.due };
        }),
      { retry: true },
    );
    if (outcome !== undefined) return outcome;
  }
  if (needed.length > 0) await faultPoint('after-queue-slot');
  return undefined;
}

/**
 * The fast ask (ledgerflow.queue_take_fast): `taken` when the run holds the slot — already, or a
 * numbered slot taken now under the queue's shared lock, no counter written; `false` when it must
 * ask the slow way (runs in line, paused, full, or the limits registered need the line). Fenced
 * as {@link acquireSlotStatement} is.
 */
export function takeFastSlotStatement(
  queue: string,
  partition: string,
  lease: Pick<Lease, 'runId' | 'fencingToken'>,
  step: string,
): RawBuilder<{ taken: boolean }> {
  return prepared(sql<{ taken: boolean }>`
    WITH owner AS MATERIALIZED (
      SELECT r.id FROM ledgerflow.workflow_run r
       WHERE r.id = ${lease.runId}::uuid AND r.fencing_token = ${lease.fencingToken} AND r.status = 'running'
         FOR NO KEY UPDATE
    )
    SELECT ledgerflow.queue_take_fast(${queue}, ${partition}, owner.id, ${step}) AS taken FROM owner`);
}

/**
 * Asks for a slot (ledgerflow.queue_acquire): NULL when held, else when to look again ('infinity':
 * when woken). Fenced: no row when the lease is gone — a worker whose lease lapsed (stalled past
 * it, its run taken over) must not take a slot, or share the new owner's, for a run it no longer
 * holds. The run's row is locked first, so a take-over waits for the ask, never interleaves.
 */
export function acquireSlotStatement(
  queue: string,
  partition: string,
  lease: Pick<Lease, 'runId' | 'fencingToken'>,
  step: string,
): RawBuilder<{ retry_at: Date | number | null }> {
  return prepared(sql<{ retry_at: Date | number | null }>`
    WITH owner AS MATERIALIZED (
      SELECT r.id, r.priority FROM ledgerflow.workflow_run r
       WHERE r.id = ${lease.runId}::uuid AND r.fencing_token = ${lease.fencingToken} AND r.status = 'running'
         FOR NO KEY UPDATE
    )
    SELECT ledgerflow.queue_acquire(${queue}, ${partition}, owner.id, ${step}, owner.priority) AS retry_at FROM owner`);
}

async function partitionOf(s: StepExecution, use: QueueUseDefinition): Promise<string> {
  if (use.partitionKey === undefined) return QUEUE_NO_PARTITION;
  const context = keyContext(s);
  const key = evaluateStepFunction(
    () => use.partitionKey!(context),
    `The partitionKey of queue "${use.queue.name}" (step "${s.step.name}")`,
  );
  if (typeof key !== 'string' || key === '' || key === QUEUE_NO_PARTITION || key.length > MAX_PARTITION_KEY_LENGTH) {
    throw new StepFailure(
      new TypeError(
        `The partitionKey of queue "${use.queue.name}" (step "${s.step.name}") must return a non-empty string of at most ` +
          `${MAX_PARTITION_KEY_LENGTH} characters, other than "${QUEUE_NO_PARTITION}" (got ${JSON.stringify(key)}).`,
      ),
    );
  }
  return key;
}
