import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { createClient, migrate } from 'ledgerflow/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backfillBatch } from '../../examples/data-backfill/backfill-batch.workflow.js';
import { dataBackfill } from '../../examples/data-backfill/data-backfill.workflow.js';
import type { AppDatabase } from '../../examples/migrations/app-database.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const ROWS = 400;
const BATCH = 25;

/** `ledgerflow worker` for the examples, as a user would run it, against the test database. */
function startWorker(url: string, faults: string): ChildProcess {
  return spawn(
    process.execPath,
    [
      'bin/ledgerflow.js',
      'worker',
      '--workflows',
      'examples/workflows.ts',
      '--concurrency',
      '1',
      '--poll-ms',
      '20',
      '--lease-ms',
      '1000',
      '--quiet',
    ],
    {
      cwd: repoRoot,
      env: { ...process.env, DATABASE_URL: url, LEDGERFLOW_FAULTS: faults },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
}

function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

describe('data-backfill killed half-way (PostgreSQL, worker child process)', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrate(store, { sources: ['generated/migrations', 'examples/migrations'] });
    await sql`INSERT INTO legacy.account (id, email, balance_euros)
              SELECT g, 'user' || g || '@example.com', g FROM generate_series(1, ${ROWS}) AS g`.execute(store.db);
  });
  afterAll(async () => store?.close());

  it('resumes where it stopped and never applies a batch twice', async () => {
    const db = store.db.withTables<AppDatabase>();
    const client = createClient({ store });
    const batches = Math.ceil((ROWS + 1) / BATCH);
    const job = { job: 'accounts', batchSize: BATCH };
    const { runId } = await client.start(dataBackfill, job, { dedupeKey: 'backfill:accounts' });

    // Killed inside a batch's transaction, after the copy's INSERT and before COMMIT.
    const faults = JSON.stringify({
      seed: 11,
      points: { 'inside-transactional-handler': { probability: 0.2, actions: ['kill'], times: 1 } },
    });
    const doomed = startWorker(store.url!, faults);
    expect(await exited(doomed)).toEqual({ code: null, signal: 'SIGKILL' });

    const doneBeforeKill = await client.listRuns({ workflow: backfillBatch.name, status: 'completed', limit: 1000 });
    expect(doneBeforeKill.length).toBeGreaterThan(0);
    expect(doneBeforeKill.length).toBeLessThan(batches);
    // The killed batch's copy rolled back with its transaction: only committed batches are visible.
    const copiedSoFar = await db
      .selectFrom('billing.account')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const progress = await db.selectFrom('billing.backfill_progress').selectAll().executeTakeFirstOrThrow();
    expect(Number(progress.rows_copied)).toBe(Number(copiedSoFar.n));
    expect(progress.batches).toBe(doneBeforeKill.length);

    // The job is started again (as after a deploy or a crash of the script that starts it): the same run.
    expect(await client.start(dataBackfill, job, { dedupeKey: 'backfill:accounts' })).toEqual({
      runId,
      created: false,
    });

    const worker = startWorker(store.url!, '');
    const run = await client.waitForRun(runId, { timeoutMs: 60_000, pollMs: 100 });
    const stopped = exited(worker);
    worker.kill('SIGTERM');
    expect(await stopped).toEqual({ code: 0, signal: null });
    expect(run.status).toBe('completed');
    expect(run.output).toMatchObject({ total: { batches, rowsCopied: ROWS } });

    const copied = await db
      .selectFrom('billing.account')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(copied.n)).toBe(ROWS);
    expect(await db.selectFrom('billing.backfill_progress').selectAll().execute()).toEqual([
      { job: 'accounts', rows_copied: ROWS, batches },
    ]);
    // One batch run per range, whatever the kill interrupted: none was started twice.
    const batchRuns = await client.listRuns({ workflow: backfillBatch.name, limit: 1000 });
    expect(batchRuns).toHaveLength(batches);
    expect(new Set(batchRuns.map((r) => r.dedupe_key)).size).toBe(batches);
    // Batches finished before the kill were not run again: still one attempt each.
    for (const done of doneBeforeKill) {
      const details = await client.getRun(done.id);
      expect(details.attempts.map((a) => a.status)).toEqual(['succeeded']);
    }
    // The batch that was killed was taken over: its first attempt is abandoned, a later one succeeded.
    const attempts = await db
      .selectFrom('ledgerflow.step_attempt')
      .select(['run_id', 'status'])
      .where('step_name', '=', 'copyBatch')
      .execute();
    expect(attempts.filter((a) => a.status === 'abandoned')).toHaveLength(1);
    expect(attempts.filter((a) => a.status === 'succeeded')).toHaveLength(batches);
  }, 120_000);
});
