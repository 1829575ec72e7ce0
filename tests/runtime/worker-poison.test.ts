import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker, type WorkerEvent } from 'ledgerflow/runtime';
import { DEFAULT_RETRY_POLICY } from '../../dsl/retry-policy.js';
import { crashLimit } from '../../runtime/worker/retry.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { eventLog, runState, startTestRun } from './fixtures/run-helpers.js';
import {
  externalPoisonHandlers,
  poison,
  POISON_WORKFLOWS,
  poisonExternal,
  poisonHandlers,
} from './fixtures/poison-workflows.js';

/**
 * Poison steps: a step whose worker dies under it (OOM, segfault, SIGKILL) leaves an attempt
 * `abandoned` with `LeaseExpired`. Such crashes are capped per step (`max(maxAttempts, 5)`),
 * backed off from the second one on, and at the cap the run fails — or parks with an open intent.
 */
const WORKER_ENTRY = fileURLToPath(new URL('./fixtures/poison-worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LEASE_MS = 400;

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly events: WorkerEvent[];
  readonly stderr: string;
}

function runPoisonWorker(databaseUrl: string): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER_ENTRY], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: databaseUrl, LEASE_MS: String(LEASE_MS) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      resolve({
        code,
        signal,
        stderr,
        events: stdout
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as WorkerEvent),
      }),
    );
  });
}

describe('crash limit', () => {
  it('is max(maxAttempts, 5): never fewer than five crashes, as many as the attempts the author budgeted', () => {
    expect(crashLimit({ ...DEFAULT_RETRY_POLICY, maxAttempts: 1 })).toBe(5);
    expect(crashLimit(DEFAULT_RETRY_POLICY)).toBe(5);
    expect(crashLimit({ ...DEFAULT_RETRY_POLICY, maxAttempts: 25 })).toBe(25);
  });
});

describe('poison step: a handler that SIGKILLs its worker process every time [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [...POISON_WORKFLOWS]);
  });
  afterAll(() => store.close());

  it('after 5 restarts the run fails, saying the step crashed its worker 5 times; every attempt is in the history', async () => {
    const runId = await startTestRun(store, poison, { label: 'sigkill' });
    const exits: Exit[] = [];
    // Each process claims the run (once its predecessor's lease expired) and dies in the step,
    // until a claim finds the crash limit reached: that process fails the run and exits 0.
    while (exits.length < 8) {
      const exit = await runPoisonWorker(store.url!);
      exits.push(exit);
      if (exit.signal !== 'SIGKILL') break;
    }
    const last = exits.at(-1)!;
    expect(
      exits.map((e) => e.signal ?? e.code),
      last.stderr,
    ).toEqual(['SIGKILL', 'SIGKILL', 'SIGKILL', 'SIGKILL', 'SIGKILL', 0]);

    const { run, attempts, results } = await runState(store, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ name: 'StepCrashedWorker', step: 'explode', crashes: 5 });
    expect((run.error as { message: string }).message).toContain('step "explode" crashed its worker 5 times');
    expect(results).toEqual([]);
    expect(
      attempts.map((a) => [a.step_name, a.attempt, a.status, (a.error as { name?: string } | null)?.name]),
    ).toEqual([1, 2, 3, 4, 5].map((n) => ['explode', n, 'abandoned', 'LeaseExpired']));
    // Each attempt belongs to its own claim (a new fencing token), and they started in order.
    expect(attempts.map((a) => a.fencing_token)).toEqual(
      [...attempts.map((a) => a.fencing_token)].sort((a, b) => a - b),
    );
    expect(new Set(attempts.map((a) => a.worker_id)).size).toBe(5);

    const crashed = exits
      .flatMap((e) => e.events)
      .filter((e): e is Extract<WorkerEvent, { type: 'step-crashed' }> => e.type === 'step-crashed');
    // The first crash is retried at once (its lease wait was the pause); crashes 2-4 back off; the 5th ends it.
    expect(crashed.map((e) => [e.crashes, e.outcome.kind])).toEqual([
      [2, 'retry'],
      [3, 'retry'],
      [4, 'retry'],
      [5, 'failed'],
    ]);
  });
});

describeStores('poison step: crashes planted in the history', (getStore) => {
  const workers: Worker[] = [];
  beforeAll(() => migrateForTest(getStore(), [...POISON_WORKFLOWS]));
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });

  /**
   * The state a worker that crashed in the step leaves: `crashes` attempts abandoned with
   * `LeaseExpired` by earlier takeovers, then one more still `running` under an expired lease.
   */
  const plantCrashes = async (runId: string, step: string, crashes: number): Promise<number> => {
    const store = getStore();
    await sql`
      WITH claimed AS (
        UPDATE ledgerflow.workflow_run
           SET status = 'running', lease_owner = 'dead-worker', lease_expires_at = now() - interval '1 second',
               fencing_token = ${crashes + 1}
         WHERE id = ${runId} RETURNING id)
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id, error, finished_at)
      SELECT id, ${step}, n, 'abandoned', n, 'dead-worker',
             jsonb_build_object('name', 'LeaseExpired', 'message', 'planted'), now()
        FROM claimed, generate_series(1, ${crashes}::int) AS n`.execute(store.db);
    await sql`
      INSERT INTO ledgerflow.step_attempt (run_id, step_name, attempt, status, fencing_token, worker_id)
      VALUES (${runId}, ${step}, ${crashes + 1}, 'running', ${crashes + 1}, 'dead-worker')`.execute(store.db);
    return crashes + 1;
  };

  it('a second crash backs off per the retry policy before the next attempt, which then runs', async () => {
    const store = getStore();
    const runId = await startTestRun(store, poison, { label: 'second-crash' });
    await plantCrashes(runId, 'explode', 1);
    const log = eventLog();
    const w = createWorker({
      store,
      workflows: [poisonHandlers('survivor')],
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      onEvent: log.onEvent,
    });
    workers.push(w);
    await w.drain({ timeoutMs: 10_000 });

    const crashed = await log.waitFor('step-crashed');
    expect(crashed).toMatchObject({ runId, step: 'explode', crashes: 2, outcome: { kind: 'retry', crashes: 2 } });
    const { run, attempts, results } = await runState(store, runId);
    expect(run.status).toBe('completed');
    expect(results.map((r) => r.output)).toEqual([{ survivedBy: 'survivor' }]);
    expect(attempts.map((a) => [a.attempt, a.status, (a.error as { name?: string } | null)?.name ?? null])).toEqual([
      [1, 'abandoned', 'LeaseExpired'],
      [2, 'abandoned', 'LeaseExpired'],
      [3, 'succeeded', null],
    ]);
    // The next attempt waited for the backoff, on the database clock.
    if (crashed.outcome.kind !== 'retry') throw new Error('expected a retry');
    expect(attempts[2]!.started_at.getTime()).toBeGreaterThanOrEqual(new Date(crashed.outcome.retryAt).getTime());
  });

  it('at the crash limit with an open intent the run parks for the reconciler; nothing is performed', async () => {
    const store = getStore();
    const runId = await startTestRun(store, poisonExternal, { label: 'parked' });
    const open = await plantCrashes(runId, 'send', 4);
    await sql`
      INSERT INTO ledgerflow.step_effect (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, reconcile_after)
      VALUES (${runId}, 'send', 'send:parked', '{}'::jsonb, 'intent', 'external', 'h', ${open}, ${open}, now())`.execute(
      store.db,
    );
    const calls = { perform: 0, reconcile: 0 };
    const log = eventLog();
    const w = createWorker({
      store,
      workflows: [externalPoisonHandlers(calls)],
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
      onEvent: log.onEvent,
    });
    workers.push(w);
    await w.drain({ timeoutMs: 10_000 });

    expect(await log.waitFor('step-crashed')).toMatchObject({ runId, crashes: 5, outcome: { kind: 'parked' } });
    const { run, attempts, effects } = await runState(store, runId);
    expect(run.status).toBe('needs_reconciliation');
    expect(run.error).toMatchObject({
      name: 'NeedsReconciliation',
      exhausted: true,
      key: 'send:parked',
      lastError: { name: 'StepCrashedWorker', crashes: 5 },
    });
    expect((run.error as { message: string }).message).toContain('crash limit reached (5/5)');
    expect(attempts.map((a) => [a.attempt, a.status])).toEqual([1, 2, 3, 4, 5].map((n) => [n, 'abandoned']));
    expect(effects.map((e) => e.status)).toEqual(['intent']);
    expect(calls).toEqual({ perform: 0, reconcile: 0 });
  });
});
