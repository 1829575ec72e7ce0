import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { WorkflowShape } from '../../dsl/workflow-shape.js';

/**
 * W0, the floor: exactly the SQL one fenced step commit needs — the run's transition checked
 * against its fencing token, the attempt, the recorded ledger row and the step result — as
 * one transaction per step, with nothing else (no claim, no polling, no handler). Its rate at
 * a given concurrency is what this machine's disk and server allow for that work; the real
 * worker is measured against it.
 */
export interface FloorResult {
  readonly concurrency: number;
  readonly commits: number;
  readonly seconds: number;
  readonly commitsPerSecond: number;
}

/** The workflow the floor pretends to run: one transactional step (registered by the caller). */
export const FLOOR_WORKFLOW = { name: 'bench-floor', version: 1, step: 'commit' } as const;

export const FLOOR_SHAPE: WorkflowShape = {
  name: FLOOR_WORKFLOW.name,
  version: FLOOR_WORKFLOW.version,
  steps: [{ name: FLOOR_WORKFLOW.step, kind: 'transactional', idempotentByKey: false }],
};

const OWNER = 'bench-floor';

export async function measureFloor(url: string, concurrency: number, commits: number): Promise<FloorResult> {
  const pool = new pg.Pool({ connectionString: url, max: concurrency, application_name: 'ledgerflow-bench-w0' });
  // A backend ending after pool.end() (e.g. the next workload dropping its database) is not an error here.
  pool.on('error', () => {});
  try {
    // Runs already claimed (status running, lease held, token 1), as the worker would hold them.
    const { rows } = await pool.query<{ id: string }>(
      `INSERT INTO ledgerflow.workflow_run
         (id, workflow_name, workflow_version, status, input, lease_owner, lease_expires_at, fencing_token)
       SELECT gen_random_uuid(), $1, $2, 'running', jsonb_build_object('i', g), $3, now() + interval '1 hour', 1
       FROM generate_series(1, $4::int) AS g
       RETURNING id`,
      [FLOOR_WORKFLOW.name, FLOOR_WORKFLOW.version, OWNER, commits],
    );
    const ids = rows.map((r) => r.id);
    await pool.query('VACUUM ANALYZE ledgerflow.workflow_run');

    let next = 0;
    const loop = async (): Promise<void> => {
      const client = await pool.connect();
      try {
        for (let i = next++; i < ids.length; i = next++) {
          await commitOneStep(client, ids[i]!, i);
        }
      } finally {
        client.release();
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: concurrency }, loop));
    const seconds = (performance.now() - started) / 1000;
    return { concurrency, commits: ids.length, seconds, commitsPerSecond: ids.length / seconds };
  } finally {
    await pool.end();
  }
}

async function commitOneStep(client: pg.PoolClient, runId: string, i: number): Promise<void> {
  const key = `floor:${i}`;
  const output = JSON.stringify({ i });
  await client.query('BEGIN');
  try {
    const transition = await client.query(
      `UPDATE ledgerflow.workflow_run
          SET status = 'completed', current_step = 1, output = $2, lease_owner = NULL,
              lease_expires_at = NULL, finished_at = now(), updated_at = now()
        WHERE id = $1 AND status = 'running' AND lease_owner = $3 AND fencing_token = $4`,
      [runId, output, OWNER, 1],
    );
    if (transition.rowCount !== 1) throw new Error(`W0: fenced transition of run ${runId} matched no row`);
    await client.query(
      `INSERT INTO ledgerflow.step_attempt
         (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
       VALUES ($1, $2, 1, 'succeeded', 1, $3, now(), now())`,
      [runId, FLOOR_WORKFLOW.step, OWNER],
    );
    await client.query(
      `INSERT INTO ledgerflow.step_effect
         (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
       VALUES ($1, $2, $3, $4, 'recorded', 'transactional', $5, 1, 1, now())`,
      [runId, FLOOR_WORKFLOW.step, key, output, key],
    );
    await client.query(
      `INSERT INTO ledgerflow.step_result
         (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
       VALUES ($1, $2, $3, $4, 'transactional', $5, 1, $6, 'recorded')`,
      [runId, FLOOR_WORKFLOW.name, FLOOR_WORKFLOW.version, FLOOR_WORKFLOW.step, output, key],
    );
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  }
}
