import { sql, type RawBuilder } from 'kysely';

/*
 * The SQL that writes carried plain steps' results (worker/carried-prefix.ts), shared by the two
 * statements that write a carry: the worker's fenced commit, which moves a run it holds, and a
 * deferred start's completed insert (client/insert-run.ts), which creates the run already
 * completed. Here, below both, because the client does not import the worker.
 */

/**
 * `carried` (the carried steps' rows: `CarriedRow[]` of worker/carried-prefix.ts, sent as one
 * jsonb parameter) and `carried_result` (their results, written for the run of CTE `runs`, column
 * `id`, only if that CTE has its row). Each result is dated when its step ended, and before the
 * carrying step's result (`now()`: its transaction's start), in step order (`rank`).
 */
export function carriedResultCtes(
  rows: unknown,
  workflowName: unknown,
  workflowVersion: unknown,
  runs: 'fenced' | 'inserted',
): RawBuilder<unknown> {
  return sql`carried AS (
      SELECT * FROM jsonb_to_recordset(${rows}::jsonb) AS c(
        step_name text, kind text, output text, skipped boolean, attempt int, started_ago double precision,
        finished_ago double precision, first boolean, rank int)
    ),
    carried_result AS (
      -- Dated when each step ended, and before the carrying step's result (now(): its transaction's start).
      INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, skipped, created_at)
      SELECT f.id, ${workflowName}, ${workflowVersion}, c.step_name, c.kind, c.output::jsonb, c.attempt, c.skipped,
             LEAST(statement_timestamp() - c.finished_ago * interval '1 millisecond', now()) - c.rank * interval '2 microseconds'
        FROM ${sql.raw(runs)} f, carried c
      RETURNING 1
    )`;
}

/**
 * `carried_attempt`: the carried steps' attempts, inserted `succeeded` under `token` for `workerId`
 * and dated by the worker's measures, for the run of CTE `runs` (only if it has its row). With
 * `firstOpened`, the first carried step's attempt is left out: an earlier statement opened it, on
 * a run the worker holds, and the carrying statement closes it itself.
 */
export function carriedAttemptsCte(
  runs: 'fenced' | 'inserted',
  token: unknown,
  workerId: unknown,
  firstOpened: boolean,
): RawBuilder<unknown> {
  return sql`carried_attempt AS (
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, started_at, finished_at)
      SELECT f.id, c.step_name, c.attempt, 'succeeded', ${token}, ${workerId},
             statement_timestamp() - c.started_ago * interval '1 millisecond',
             statement_timestamp() - c.finished_ago * interval '1 millisecond'
        FROM ${sql.raw(runs)} f, carried c${
          firstOpened
            ? sql`
       WHERE NOT c.first`
            : sql``
        }
      RETURNING 1
    )`;
}
