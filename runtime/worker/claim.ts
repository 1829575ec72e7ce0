import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import type { WorkflowRegistry } from './registry.js';

/** A run this worker holds under a lease, positioned at its current step. */
export interface LeasedRun {
  readonly id: string;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly input: Json;
  readonly currentStep: number;
  readonly fencingToken: number;
  /** The `running` attempt of the current step; `null` when the workflow has no step left. */
  readonly attempt: number | null;
  /** Failed attempts of the current step so far (what `maxAttempts` counts). */
  readonly priorFailures: number;
  /** Checkpointed outputs of the steps before the current one. */
  readonly outputs: Readonly<Record<string, Json>>;
}

interface LeasedRunRow {
  id: string;
  workflow_name: string;
  workflow_version: number;
  input: Json;
  current_step: number;
  fencing_token: number;
  attempt: number | null;
  prior_failures: number;
  outputs: Record<string, Json> | null;
}

/** `ms` as an SQL interval; durations come from the worker, instants always from `now()`. */
export function millis(ms: number): RawBuilder<unknown> {
  return sql`(${ms}::double precision * interval '1 millisecond')`;
}

export interface ClaimOptions {
  readonly workerId: string;
  readonly leaseMs: number;
  readonly limit: number;
}

/**
 * Claims up to `limit` runnable runs of the registered workflow versions in ONE statement (one
 * round trip, one commit): runs that are pending and due, or running under an expired lease.
 * `FOR NO KEY UPDATE SKIP LOCKED` lets concurrent workers take disjoint runs without waiting
 * (NO KEY: the key-share lock that an in-flight transactional step's ledger insert holds on the
 * run through its foreign key must not hide the run, or a stalled zombie could never be
 * overtaken); each
 * claimed run gets `fencing_token + 1`, so whatever the previous owner still tries to commit is
 * refused. In the same commit the previous owner's `running` attempt is closed as `abandoned`
 * and the current step's next attempt (max + 1: gap-free) is opened. Times are `now()`.
 */
export async function claimRuns(db: Kysely<LedgerflowDatabase>, registry: WorkflowRegistry, options: ClaimOptions): Promise<LeasedRun[]> {
  const { rows } = await sql<LeasedRunRow>`
    WITH candidate AS (
      SELECT r.id
        FROM ledgerflow.workflow_run r
        JOIN unnest(${registry.names}::text[], ${registry.versions}::int[]) AS w(name, version)
          ON r.workflow_name = w.name AND r.workflow_version = w.version
       WHERE (r.status = 'pending' AND r.run_after <= now())
          OR (r.status = 'running' AND r.lease_expires_at <= now())
       ORDER BY r.run_after
       LIMIT ${options.limit}
         FOR NO KEY UPDATE OF r SKIP LOCKED
    ),
    claimed AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'running',
             lease_owner = ${options.workerId},
             lease_expires_at = now() + ${millis(options.leaseMs)},
             fencing_token = r.fencing_token + 1,
             updated_at = now()
        FROM candidate c
       WHERE r.id = c.id
      RETURNING r.id, r.workflow_name, r.workflow_version, r.input, r.current_step, r.fencing_token
    ),
    current_def AS (
      SELECT c.id AS run_id, d.step_name
        FROM claimed c
        JOIN ledgerflow.workflow_step_def d
          ON d.workflow_name = c.workflow_name AND d.version = c.workflow_version AND d.position = c.current_step
    ),
    abandoned AS (
      UPDATE ledgerflow.step_attempt a
         SET status = 'abandoned', finished_at = now(),
             error = jsonb_build_object('name', 'LeaseExpired',
                       'message', 'the worker holding this attempt stopped renewing its lease; the run was claimed again')
        FROM claimed c
       WHERE a.run_id = c.id AND a.status = 'running'
      RETURNING a.run_id
    ),
    opened AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id)
      SELECT s.run_id, s.step_name,
             1 + COALESCE((SELECT max(a.attempt) FROM ledgerflow.step_attempt a
                            WHERE a.run_id = s.run_id AND a.step_name = s.step_name), 0),
             'running', c.fencing_token, ${options.workerId}
        FROM current_def s JOIN claimed c ON c.id = s.run_id
      RETURNING run_id, attempt
    )
    SELECT c.id, c.workflow_name, c.workflow_version, c.input, c.current_step, c.fencing_token,
           o.attempt,
           (SELECT count(*) FROM ledgerflow.step_attempt a
             WHERE a.run_id = c.id AND a.step_name = s.step_name AND a.status = 'failed')::int AS prior_failures,
           CASE WHEN c.current_step > 0 THEN
             (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res WHERE res.run_id = c.id)
           END AS outputs
      FROM claimed c
      LEFT JOIN current_def s ON s.run_id = c.id
      LEFT JOIN opened o ON o.run_id = c.id`.execute(db);
  return rows.map(toLeasedRun);
}

/**
 * Re-reads a run this worker believes it holds, after a commit whose outcome is unknown: the
 * database says where the run is. `undefined` when the lease is no longer ours (or the run was
 * released by that very commit) — the caller stops driving it.
 */
export async function loadLeasedRun(db: Kysely<LedgerflowDatabase>, runId: string, fencingToken: number): Promise<LeasedRun | undefined> {
  const { rows } = await sql<LeasedRunRow>`
    SELECT r.id, r.workflow_name, r.workflow_version, r.input, r.current_step, r.fencing_token,
           a.attempt,
           (SELECT count(*) FROM ledgerflow.step_attempt f
             WHERE f.run_id = r.id AND f.step_name = d.step_name AND f.status = 'failed')::int AS prior_failures,
           (SELECT jsonb_object_agg(res.step_name, res.output) FROM ledgerflow.step_result res WHERE res.run_id = r.id) AS outputs
      FROM ledgerflow.workflow_run r
      LEFT JOIN ledgerflow.workflow_step_def d
        ON d.workflow_name = r.workflow_name AND d.version = r.workflow_version AND d.position = r.current_step
      LEFT JOIN ledgerflow.step_attempt a
        ON a.run_id = r.id AND a.step_name = d.step_name AND a.status = 'running'
     WHERE r.id = ${runId} AND r.fencing_token = ${fencingToken} AND r.status = 'running'`.execute(db);
  const row = rows[0];
  if (row === undefined) return undefined;
  // A held run always has its current step's attempt open; without one, the lease is not usable.
  if (row.attempt === null) return undefined;
  return toLeasedRun(row);
}

function toLeasedRun(row: LeasedRunRow): LeasedRun {
  return {
    id: row.id,
    workflowName: row.workflow_name,
    workflowVersion: row.workflow_version,
    input: row.input,
    currentStep: row.current_step,
    fencingToken: row.fencing_token,
    attempt: row.attempt,
    priorFailures: row.prior_failures,
    outputs: row.outputs ?? {},
  };
}
