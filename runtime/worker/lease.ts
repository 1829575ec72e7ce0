import { sql, type Kysely, type RawBuilder } from 'kysely';
import { LeaseLostError } from '../errors.js';
import { prepared } from '../store/prepared.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { millis } from '../store/millis.js';
import { assertAttemptTransition, assertRunTransition } from '../store/state-machines.js';

/*
 * Leases as the database holds them: `lease_owner`, `lease_expires_at` (database time) and the
 * `fencing_token` every commit is fenced by. A held lease is a run id AND a token. Renewal
 * (`renewLeases`, the lease keeper's one statement per beat) writes `running -> running` with a
 * later expiry; a lease whose token moved on or whose run left `running` is reported lost.
 * Release (`releaseLeases`, the worker stopping) writes `running -> pending`, due now, its running
 * attempt `abandoned` without counting. Stateless: what the worker holds is in its flights.
 */

export interface HeldLease {
  readonly runId: string;
  readonly fencingToken: number;
}

/** The lease a step commit is fenced by: the run, the token its claim got, the holder and the lease length. */
export interface Lease {
  readonly runId: string;
  readonly fencingToken: number;
  readonly workerId: string;
  readonly leaseMs: number;
}

export interface RenewalResult {
  /**
   * Leases whose token moved on or whose run left `running`: abort their handlers. Identified by
   * run id AND token: a worker may hold a stale flight and a new one of the same run at once
   * (it claimed the run again after its own lease expired), and only the stale one is lost.
   */
  readonly lost: readonly HeldLease[];
}

/**
 * Extends every lease this worker holds in one statement. A run whose row is locked right now
 * (its own step commit is in flight) is skipped, not waited for: that commit extends the lease
 * itself. Only a token that moved, or a run that is no longer running, counts as lost.
 */
export async function renewLeases(
  db: Kysely<LedgerflowDatabase>,
  leases: readonly HeldLease[],
  leaseMs: number,
): Promise<RenewalResult> {
  if (leases.length === 0) return { lost: [] };
  const { rows } = await renewLeasesStatement(leases, leaseMs).execute(db);
  return { lost: rows.filter((r) => r.lost).map((r) => ({ runId: r.id, fencingToken: r.fencing_token })) };
}

/** The statement of {@link renewLeases}. */
export function renewLeasesStatement(
  leases: readonly HeldLease[],
  leaseMs: number,
): RawBuilder<{ id: string; fencing_token: number; lost: boolean }> {
  assertRunTransition('running', 'running');
  return prepared(sql<{ id: string; fencing_token: number; lost: boolean }>`
    WITH mine AS (
      SELECT * FROM unnest(${leases.map((l) => l.runId)}::uuid[], ${leases.map((l) => l.fencingToken)}::bigint[])
        AS m(id, fencing_token)
    ),
    lockable AS (
      SELECT r.id FROM ledgerflow.workflow_run r JOIN mine m USING (id, fencing_token)
       WHERE r.status = 'running'
         FOR NO KEY UPDATE OF r SKIP LOCKED
    ),
    renewed AS (
      UPDATE ledgerflow.workflow_run r SET lease_expires_at = statement_timestamp() + ${millis(leaseMs)}
        FROM lockable l WHERE r.id = l.id
      RETURNING r.id
    )
    SELECT m.id, m.fencing_token, (r.id IS NULL OR r.fencing_token <> m.fencing_token OR r.status <> 'running') AS lost
      FROM mine m LEFT JOIN ledgerflow.workflow_run r ON r.id = m.id`);
}

/**
 * Gives leases back (worker stopping): the run returns to `pending`, due now, and its open
 * attempt is closed as `abandoned` — only where the token is still ours, in one commit.
 */
export async function releaseLeases(
  db: Kysely<LedgerflowDatabase>,
  leases: readonly HeldLease[],
  reason: string,
): Promise<string[]> {
  if (leases.length === 0) return [];
  const { rows } = await releaseLeasesStatement(leases, reason).execute(db);
  return rows.map((r) => r.id);
}

/** The statement of {@link releaseLeases}. */
export function releaseLeasesStatement(leases: readonly HeldLease[], reason: string): RawBuilder<{ id: string }> {
  assertRunTransition('running', 'pending');
  assertAttemptTransition('running', 'abandoned');
  return sql<{ id: string }>`
    WITH mine AS (
      SELECT * FROM unnest(${leases.map((l) => l.runId)}::uuid[], ${leases.map((l) => l.fencingToken)}::bigint[])
        AS m(id, fencing_token)
    ),
    released AS (
      UPDATE ledgerflow.workflow_run r
         SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = statement_timestamp(), updated_at = statement_timestamp()
        FROM mine m
       WHERE r.id = m.id AND r.fencing_token = m.fencing_token AND r.status = 'running'
      RETURNING r.id
    ),
    closed AS (
      UPDATE ledgerflow.step_attempt a
         SET status = 'abandoned', finished_at = statement_timestamp(),
             error = jsonb_build_object('name', 'WorkerStopped', 'message', ${reason}::text)
        FROM released x
       WHERE a.run_id = x.id AND a.status = 'running'
      RETURNING a.run_id
    )
    SELECT id FROM released`;
}

/** Used where a commit's fenced check found nothing: the run is no longer ours. */
export function leaseLost(lease: Lease, what: string): LeaseLostError {
  return new LeaseLostError(
    `Run ${lease.runId}: fencing token ${lease.fencingToken} is no longer current; ${what} was rolled back.`,
  );
}
