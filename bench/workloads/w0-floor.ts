import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { oneStep } from './bench-workflows.js';

/**
 * W0, the floor: exactly the SQL one fenced step commit needs — the run's transition checked
 * against its fencing token, the attempt, the recorded ledger row and the step result — as
 * one transaction per step, with nothing else (no claim, no polling, no handler). Its rate at
 * a given concurrency is what this machine's disk and server allow for that work; the real
 * worker is measured against it.
 *
 * Two forms: `statement` sends the four writes as ONE statement (data-modifying CTEs; one round
 * trip, the least the work can cost — this is the floor the ratios use), `transaction` as four
 * statements between BEGIN and COMMIT (six round trips), for comparison.
 */
export type FloorForm = 'statement' | 'transaction';
export interface FloorResult {
  readonly concurrency: number;
  readonly commits: number;
  readonly seconds: number;
  readonly commitsPerSecond: number;
  /** CPU time of this process (the driver loop) while measuring, in ms. */
  readonly cpuMs: number;
}

/** The floor writes exactly what W1's one `transactional` step commits, for the same workflow. */
const FLOOR_WORKFLOW = { name: oneStep.name, version: oneStep.version, step: oneStep.steps[0]!.name } as const;

const OWNER = 'bench-floor';

export async function measureFloor(
  url: string,
  concurrency: number,
  commits: number,
  form: FloorForm,
): Promise<FloorResult> {
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
          await (form === 'statement' ? commitOneStatement : commitOneTransaction)(client, ids[i]!, i);
        }
      } finally {
        client.release();
      }
    };
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    await Promise.all(Array.from({ length: concurrency }, loop));
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    return {
      concurrency,
      commits: ids.length,
      seconds,
      commitsPerSecond: ids.length / seconds,
      cpuMs: (cpu.user + cpu.system) / 1000,
    };
  } finally {
    await pool.end();
  }
}

async function commitOneStatement(client: pg.PoolClient, runId: string, i: number): Promise<void> {
  const key = `floor:${i}`;
  const output = JSON.stringify({ i });
  const { rows } = await client.query<{ n: number }>(
    `WITH transition AS (
       UPDATE ledgerflow.workflow_run
          SET status = 'completed', current_step = 1, output = $2, lease_owner = NULL,
              lease_expires_at = NULL, finished_at = now(), updated_at = now()
        WHERE id = $1 AND status = 'running' AND lease_owner = $3 AND fencing_token = 1
       RETURNING id
     ),
     attempt AS (
       INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
       SELECT id, $4, 1, 'succeeded', 1, $3, now(), now() FROM transition
     ),
     effect AS (
       INSERT INTO ledgerflow.step_effect
              (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
       SELECT id, $4, $5, $2, 'recorded', 'transactional', $5, 1, 1, now() FROM transition
       RETURNING workflow_id
     ),
     result AS (
       INSERT INTO ledgerflow.step_result
              (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
       SELECT workflow_id, $6, $7, $4, 'transactional', $2, 1, $5, 'recorded' FROM effect
     )
     SELECT count(*)::int AS n FROM transition`,
    [runId, output, OWNER, FLOOR_WORKFLOW.step, key, FLOOR_WORKFLOW.name, FLOOR_WORKFLOW.version],
  );
  if (rows[0]?.n !== 1) throw new Error(`W0: fenced transition of run ${runId} matched no row`);
}

async function commitOneTransaction(client: pg.PoolClient, runId: string, i: number): Promise<void> {
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
