import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import { ConflictError } from '../errors.js';
import { prepared } from '../store/prepared.js';
import type { EffectStatus, Json, LedgerflowDatabase } from '../store/tables.js';
import { millis } from '../store/millis.js';
import { flushCtes, flushValues, type FlushParams } from './carried-prefix.js';
import { shapeOfRecord, type ShapeSlot } from '../store/statement-shapes.js';
import type { Lease } from './lease.js';
import { assertEffectTransition, assertRunTransition } from '../store/state-machines.js';

/*
 * Ledger statements of the effect kinds. The ledger (`step_effect`, primary key
 * (workflow_id, step_name, idempotency_key)) is written with `INSERT … ON CONFLICT DO NOTHING`:
 * whoever finds a row already there reuses or reconciles it and never performs again blindly.
 * A step holds at most one ledger row: a row under a different key, or the same key with a
 * different request hash, is a {@link ConflictError} and is never overwritten.
 */

/** A `step_effect` row as the ledger statements read it back. */
export interface EffectRow {
  readonly idempotency_key: string;
  readonly status: EffectStatus;
  readonly kind: 'transactional' | 'external';
  readonly request_hash: string;
  readonly effect: Json;
  readonly attempt: number;
  readonly fencing_token: number;
  readonly intent_at: string;
  /** How many times the provider was asked about this intent (read by the intent commit only). */
  readonly reconcile_attempts?: number;
}

export interface EffectClaim {
  readonly key: string;
  readonly requestHash: string;
  readonly attempt: number;
}

/**
 * Checks an existing ledger row of a step against the key and request hash this attempt
 * computed. Throws a {@link ConflictError} naming both keys or hashes.
 */
export function matchExisting(
  rows: readonly EffectRow[],
  step: StepDefinition,
  claim: EffectClaim,
  runId: string,
): EffectRow {
  const row = rows.find((r) => r.idempotency_key === claim.key);
  const other = rows.find((r) => r.idempotency_key !== claim.key);
  if (other !== undefined) {
    throw new ConflictError(
      `Step "${step.name}" of run ${runId} already has a ledger row under key "${other.idempotency_key}" (${other.status}), ` +
        `but its key function now returns "${claim.key}". Keys must be stable: a changed key function needs a new workflow version. ` +
        'Nothing was overwritten.',
    );
  }
  if (row === undefined) {
    throw new Error(`internal: no ledger row for step "${step.name}" of run ${runId} under key "${claim.key}"`);
  }
  if (row.request_hash !== claim.requestHash) {
    throw new ConflictError(
      `Step "${step.name}" of run ${runId}: key "${claim.key}" is already in the ledger for a different request ` +
        `(hash ${row.request_hash.slice(0, 12)}…, this attempt ${claim.requestHash.slice(0, 12)}…). ` +
        'A retry must send the same request under the same key; nothing was overwritten.',
    );
  }
  return row;
}

export interface OpenedTransactionalEffect {
  readonly fenced: boolean;
  /** The run's deadline passed while carried steps ran (database time); false without carried steps. */
  readonly overdue: boolean;
  readonly inserted: boolean;
  readonly existing: readonly EffectRow[];
  /** The session's backend pid: how a stuck statement of this transaction can be ended from outside. */
  readonly pid: number;
}

/** What the statement opening a transactional step's ledger row answers (with or without carried steps). */
export interface OpeningRow {
  readonly fenced: boolean;
  readonly overdue?: boolean | null;
  readonly inserted: boolean;
  readonly existing: EffectRow[] | null;
  readonly pid: number;
}

/**
 * First statement of a transactional step's transaction: reads the fence (without locking the
 * run: the final, fenced UPDATE is what decides, so a zombie can be overtaken while its handler
 * runs and its writes then roll back) and inserts the ledger row as `recorded`. Its `effect` is
 * filled by the same transaction's final statement. A concurrent transaction inserting the same
 * key makes this statement wait for it; if it committed, `inserted` is false. With `flush`, the
 * plain steps carried before this one are written by the same statement, fenced the same way
 * ({@link openTransactionalEffectAfterCarryStatement}). The caller sends it (possibly pipelined
 * behind BEGIN) and reads its row with {@link toOpenedTransactionalEffect}.
 */
export function openingStatement(
  lease: Lease,
  step: StepDefinition,
  claim: EffectClaim,
  flush: FlushParams | undefined,
): RawBuilder<OpeningRow> {
  return flush === undefined
    ? openTransactionalEffectStatement(lease, step, claim)
    : openTransactionalEffectAfterCarryStatement(flush, claim, performance.now());
}

export function toOpenedTransactionalEffect(row: OpeningRow): OpenedTransactionalEffect {
  return {
    fenced: row.fenced,
    overdue: row.overdue === true,
    inserted: row.inserted,
    existing: row.existing ?? [],
    pid: row.pid,
  };
}

const OPEN_TRANSACTIONAL_SHAPE: ShapeSlot = {};

/** The statement {@link openingStatement} sends without carried steps: built once, then only its values filled in. */
export function openTransactionalEffectStatement(
  lease: Lease,
  step: StepDefinition,
  claim: EffectClaim,
): RawBuilder<OpeningRow> {
  assertEffectTransition('none', 'recorded');
  return shapeOfRecord(OPEN_TRANSACTIONAL_SHAPE, transactionalEffectValues(lease, step, claim), (v) =>
    prepared(sql<OpeningRow>`
    WITH fence AS (
      SELECT id FROM ledgerflow.workflow_run
       WHERE id = ${v.runId} AND fencing_token = ${v.fencingToken} AND status = 'running'
    ), ${transactionalEffectCtes('fence', v)}
    SELECT EXISTS (SELECT 1 FROM fence) AS fenced,
           EXISTS (SELECT 1 FROM inserted) AS inserted,
           (SELECT json_agg(e) FROM existing e) AS existing,
           pg_backend_pid() AS pid`),
  );
}

const OPEN_TRANSACTIONAL_AFTER_CARRY_SHAPE: ShapeSlot = {};

/**
 * {@link openTransactionalEffectStatement} when plain steps were carried to this one: ONE statement
 * writes the carry (moving the run to this step, opening its attempt: `flushCarry`'s CTEs, whose
 * fenced UPDATE is the fence) and inserts the ledger row — one round trip fewer than the two in
 * turn. `overdue`: the run's deadline passed while the carried steps ran (nothing of this
 * transaction may commit then: the caller rolls it back). Built once, then only its values filled in.
 */
export function openTransactionalEffectAfterCarryStatement(
  flush: FlushParams,
  claim: EffectClaim,
  now: number,
): RawBuilder<OpeningRow> {
  assertEffectTransition('none', 'recorded');
  // The same run, token and step in both records: one value each.
  const values = { ...flushValues(flush, now), ...transactionalEffectValues(flush.lease, flush.step, claim) };
  return shapeOfRecord(OPEN_TRANSACTIONAL_AFTER_CARRY_SHAPE, values, (v) =>
    prepared(sql<OpeningRow>`
    WITH ${flushCtes(v)}, ${transactionalEffectCtes('fenced', v)}
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           (SELECT overdue FROM fenced) AS overdue,
           EXISTS (SELECT 1 FROM inserted) AS inserted,
           (SELECT json_agg(e) FROM existing e) AS existing,
           pg_backend_pid() AS pid`),
  );
}

/** What a transactional step's ledger row is written from: every value a parameter. */
interface TransactionalEffectValues {
  readonly runId: string;
  readonly fencingToken: number;
  readonly stepName: string;
  readonly key: string;
  readonly requestHash: string;
  readonly effectAttempt: number;
}

function transactionalEffectValues(lease: Lease, step: StepDefinition, claim: EffectClaim): TransactionalEffectValues {
  return {
    runId: lease.runId,
    fencingToken: lease.fencingToken,
    stepName: step.name,
    key: claim.key,
    requestHash: claim.requestHash,
    effectAttempt: claim.attempt,
  };
}

/**
 * The ledger row of a transactional step, inserted `recorded` (its `effect` filled by the
 * transaction's final statement) unless the step already has one (`existing`), for the run the
 * CTE `fence` yields: `existing` and `inserted`.
 */
function transactionalEffectCtes(fence: 'fence' | 'fenced', v: TransactionalEffectValues): RawBuilder<unknown> {
  return sql`
    existing AS (
      SELECT idempotency_key, status, kind, request_hash, effect, attempt, fencing_token, intent_at
        FROM ledgerflow.step_effect WHERE workflow_id = ${v.runId} AND step_name = ${v.stepName}
    ),
    inserted AS (
      INSERT INTO ledgerflow.step_effect
             (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
      SELECT id, ${v.stepName}, ${v.key}, 'null'::jsonb, 'recorded', 'transactional', ${v.requestHash},
             ${v.effectAttempt}, ${v.fencingToken}, statement_timestamp()
        FROM ${sql.raw(fence)}
       WHERE NOT EXISTS (SELECT 1 FROM existing)
      ON CONFLICT DO NOTHING
      RETURNING 1
    )`;
}

/** A fresh read of a step's ledger rows (a new statement sees rows committed meanwhile). */
export async function readEffects(
  db: Kysely<LedgerflowDatabase>,
  runId: string,
  stepName: string,
): Promise<EffectRow[]> {
  const { rows } = await readEffectsStatement(runId, stepName).execute(db);
  return rows;
}

/** The read of {@link readEffects}. */
export function readEffectsStatement(runId: string, stepName: string): RawBuilder<EffectRow> {
  return sql<EffectRow>`
    SELECT idempotency_key, status, kind, request_hash, effect, attempt, fencing_token, intent_at::text AS intent_at
      FROM ledgerflow.step_effect WHERE workflow_id = ${runId} AND step_name = ${stepName}`;
}

export interface OpenedIntent {
  readonly fenced: boolean;
  /** This attempt now owns an intent (new, re-taken from `released`, or taken over by key). */
  readonly owned: boolean;
  readonly existing: readonly EffectRow[];
  /** Whether the existing intent's horizon (`reconcile_after`, database time) has passed, and when it does. */
  readonly due: boolean;
  readonly dueAt: Date | null;
}

/**
 * When an intent written now may be reconciled: its perform starts within one lease of the
 * intent commit (the worker checks) and is abandoned after `performTimeoutMs`, so by then no
 * request of this attempt can still reach the provider (given a client timeout within
 * `performTimeoutMs`). Computed by the writer and stored, so every reader agrees.
 */
export function intentHorizon(lease: Lease, step: StepDefinition): RawBuilder<unknown> {
  return sql`statement_timestamp() + ${millis(lease.leaseMs + step.performTimeoutMs)}`;
}

/**
 * The fence of a statement that writes the ledger for the run `lease` holds at `position`: it
 * extends the lease and returns the run's id only while the token still holds it there.
 */
export function fenceAtStep(lease: Lease, position: number): RawBuilder<unknown> {
  return sql`UPDATE ledgerflow.workflow_run SET lease_expires_at = statement_timestamp() + ${millis(lease.leaseMs)}, updated_at = statement_timestamp()
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
         AND current_step = ${position}
      RETURNING id`;
}

/**
 * The intent commit of an external step, ONE statement: fence (and extend the lease), then
 * `INSERT … status 'intent' … ON CONFLICT DO NOTHING`, with its horizon. In the same statement a
 * `released` row with this key and request is re-taken, and for an `idempotentByKey` step an open
 * intent is taken over (the provider dedupes, so performing again with the same key is safe).
 * Anything else found is returned for the caller to reuse, reconcile or refuse.
 */
export async function openIntent(
  db: Kysely<LedgerflowDatabase>,
  lease: Lease,
  step: StepDefinition,
  claim: EffectClaim,
): Promise<OpenedIntent> {
  const { rows } = await openIntentStatement(lease, step, claim).execute(db);
  const row = rows[0]!;
  return {
    fenced: row.fenced,
    owned: row.inserted || row.retaken,
    existing: row.existing ?? [],
    due: row.due === true,
    dueAt: row.due_at,
  };
}

/** The row {@link openIntentStatement} returns. */
export interface OpenIntentRow {
  fenced: boolean;
  inserted: boolean;
  retaken: boolean;
  existing: EffectRow[] | null;
  due: boolean | null;
  due_at: Date | null;
}

/** The statement of {@link openIntent}. */
export function openIntentStatement(lease: Lease, step: StepDefinition, claim: EffectClaim): RawBuilder<OpenIntentRow> {
  assertRunTransition('running', 'running');
  assertEffectTransition('none', 'intent');
  assertEffectTransition('released', 'intent');
  if (step.idempotentByKey) assertEffectTransition('intent', 'intent');
  const horizon = intentHorizon(lease, step);
  return prepared(sql<OpenIntentRow>`
    WITH fenced AS (
      ${fenceAtStep(lease, step.position)}
    ),
    existing AS (
      SELECT idempotency_key, status, kind, request_hash, effect, attempt, fencing_token, intent_at, reconcile_after, reconcile_attempts
        FROM ledgerflow.step_effect WHERE workflow_id = ${lease.runId} AND step_name = ${step.name}
    ),
    inserted AS (
      INSERT INTO ledgerflow.step_effect
             (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token,
              intent_at, reconcile_after)
      SELECT id, ${step.name}, ${claim.key}, 'null'::jsonb, 'intent', 'external', ${claim.requestHash},
             ${claim.attempt}, ${lease.fencingToken}, statement_timestamp(), ${horizon}
        FROM fenced
       WHERE NOT EXISTS (SELECT 1 FROM existing)
      ON CONFLICT DO NOTHING
      RETURNING 1
    ),
    retaken AS (
      UPDATE ledgerflow.step_effect
         SET status = 'intent', attempt = ${claim.attempt}, fencing_token = ${lease.fencingToken},
             intent_at = statement_timestamp(), reconcile_after = ${horizon},
             resolution = CASE WHEN status = 'released' THEN resolution || '; taken again by attempt ' || ${claim.attempt}::text
                               ELSE resolution END
       WHERE workflow_id = ${lease.runId} AND step_name = ${step.name} AND idempotency_key = ${claim.key}
         AND request_hash = ${claim.requestHash}
         AND (status = 'released' OR (status = 'intent' AND ${step.idempotentByKey}::boolean))
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    ),
    mine AS (
      SELECT * FROM existing WHERE idempotency_key = ${claim.key}
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
           EXISTS (SELECT 1 FROM inserted) AS inserted,
           EXISTS (SELECT 1 FROM retaken) AS retaken,
           (SELECT json_agg(e) FROM existing e) AS existing,
           (SELECT m.reconcile_after <= statement_timestamp() FROM mine m) AS due,
           (SELECT m.reconcile_after FROM mine m) AS due_at`);
}

/**
 * Reconcile said `not_found`: the provider never applied the key, so this attempt takes the
 * intent over (same key, new attempt and token, fresh `intent_at`) and performs again.
 * Fenced, one statement; `false` when the intent changed under us.
 */
export async function retakeIntent(
  db: Kysely<LedgerflowDatabase>,
  lease: Lease,
  step: StepDefinition,
  claim: EffectClaim,
  fromAttempt: number,
): Promise<{ readonly fenced: boolean; readonly retaken: boolean }> {
  const { rows } = await retakeIntentStatement(lease, step, claim, fromAttempt).execute(db);
  return { fenced: rows[0]?.fenced === true, retaken: rows[0]?.retaken === true };
}

/** The statement of {@link retakeIntent}. */
export function retakeIntentStatement(
  lease: Lease,
  step: StepDefinition,
  claim: EffectClaim,
  fromAttempt: number,
): RawBuilder<{ fenced: boolean; retaken: boolean }> {
  assertRunTransition('running', 'running');
  assertEffectTransition('intent', 'intent');
  return sql<{ fenced: boolean; retaken: boolean }>`
    WITH fenced AS (
      UPDATE ledgerflow.workflow_run SET lease_expires_at = statement_timestamp() + ${millis(lease.leaseMs)}, updated_at = statement_timestamp()
       WHERE id = ${lease.runId} AND fencing_token = ${lease.fencingToken} AND status = 'running'
      RETURNING id
    ),
    retaken AS (
      UPDATE ledgerflow.step_effect
         SET attempt = ${claim.attempt}, fencing_token = ${lease.fencingToken}, intent_at = statement_timestamp(),
             reconcile_after = ${intentHorizon(lease, step)},
             resolution = ${`not_found by reconcile in attempt ${claim.attempt}; performing again with the same key`}
       WHERE workflow_id = ${lease.runId} AND step_name = ${step.name} AND idempotency_key = ${claim.key}
         AND status = 'intent' AND attempt = ${fromAttempt}
         AND EXISTS (SELECT 1 FROM fenced)
      RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM fenced) AS fenced, EXISTS (SELECT 1 FROM retaken) AS retaken`;
}
