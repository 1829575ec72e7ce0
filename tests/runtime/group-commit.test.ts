import { sql, type KyselyPlugin, type OperationNode, type RawNode } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker, type Store } from 'ledgerflow/runtime';
import { claimRuns } from '../../runtime/worker/claim.js';
import type { LeasedRun } from '../../runtime/store/leased-run.js';
import { CommitQueue } from '../../runtime/worker/commit-queue.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { advanceRuns, advanceRunsStatement } from '../../runtime/worker/step-commits.js';
import type { AdvanceParams, ResultEffect } from '../../runtime/worker/result-commit.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { eventLog, runState, startTestRun } from './fixtures/run-helpers.js';

/**
 * Group commit (runtime/worker/commit-queue.ts, `advanceRunsStatement`): several runs' result
 * commits in one statement, each fenced by its own token, one run's lease loss or error never
 * failing the others, and a lone commit sent at once.
 */
const input = z.object({ i: z.number().int() });
const grouped = workflow('gc-two-steps', { version: 1, input })
  .transactional('debit', { output: z.object({ debited: z.number() }), key: ({ input }) => `debit:${input.i}` })
  .step('notify', { output: z.object({ sent: z.boolean() }) });
const registration = bindHandlers(
  grouped,
  {
    debit: async (ctx) => ctx.record({ debited: ctx.input.i * 10 }),
    notify: () => ({ sent: true }),
  },
  shapeHash(grouped),
);
const WORKER = 'gc-worker';

describeStores('group commit', (getStore) => {
  const registry = buildRegistry([registration]);
  beforeAll(() => migrateForTest(getStore(), [grouped]));

  /** Starts `n` runs and claims them (the debit step's attempt 1 opened, token 1). */
  async function claimed(n: number): Promise<LeasedRun[]> {
    const store = getStore();
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push(await startTestRun(store, grouped, { i: 100 + i }));
    const runs = await claimRuns(store.db, registry, { workerId: WORKER, leaseMs: 30_000, limit: n });
    expect(runs.map((r) => r.id).sort()).toEqual([...ids].sort());
    return runs;
  }

  /** The debit step's result commit for `run`: ledger row inserted recorded, next step held. */
  function debitCommit(run: LeasedRun, options: { fencingToken?: number; effect?: ResultEffect } = {}): AdvanceParams {
    const step = grouped.steps[0]!;
    const i = (run.input as { i: number }).i;
    return {
      lease: {
        runId: run.id,
        fencingToken: options.fencingToken ?? run.fencingToken,
        workerId: WORKER,
        leaseMs: 30_000,
      },
      workflowName: grouped.name,
      workflowVersion: grouped.version,
      step,
      attempt: run.attempt!,
      resultAttempt: run.attempt!,
      output: { debited: i * 10 },
      effect: options.effect ?? {
        key: `debit:${i}`,
        mode: 'insert-recorded',
        attempt: run.attempt!,
        requestHash: `hash-${i}`,
      },
      continuation: { kind: 'hold', nextStep: 'notify' },
    };
  }

  async function expectAdvanced(run: LeasedRun): Promise<void> {
    const { run: row, attempts, effects, results } = await runState(getStore(), run.id);
    expect(row).toMatchObject({
      status: 'running',
      current_step: 1,
      lease_owner: WORKER,
      fencing_token: run.fencingToken,
    });
    expect(attempts.map((a) => [a.step_name, a.attempt, a.status])).toEqual([
      ['debit', 1, 'succeeded'],
      ['notify', 1, 'running'],
    ]);
    expect(effects.map((e) => [e.step_name, e.status, e.effect])).toEqual([['debit', 'recorded', results[0]!.output]]);
    expect(results.map((r) => [r.step_name, r.attempt, r.effect_status])).toEqual([['debit', 1, 'recorded']]);
  }

  async function expectUntouched(run: LeasedRun): Promise<void> {
    const { run: row, attempts, effects, results } = await runState(getStore(), run.id);
    expect(row).toMatchObject({ status: 'running', current_step: 0, fencing_token: run.fencingToken });
    expect(attempts.map((a) => [a.step_name, a.attempt, a.status])).toEqual([['debit', 1, 'running']]);
    expect(effects).toEqual([]);
    expect(results).toEqual([]);
  }

  it('commits every fenced run of a group and reports the lease lost only for the run whose token is stale', async () => {
    const [a, zombie, c] = await claimed(3);
    const results = await advanceRuns(getStore().db, [
      debitCommit(a!),
      debitCommit(zombie!, { fencingToken: zombie!.fencingToken - 1 }),
      debitCommit(c!),
    ]);
    expect(results).toEqual([
      { fenced: true, nextAttempt: 1, claimed: undefined, effectExists: false, overdue: false },
      { fenced: false, nextAttempt: null, claimed: undefined, effectExists: false, overdue: false },
      { fenced: true, nextAttempt: 1, claimed: undefined, effectExists: false, overdue: false },
    ]);
    await expectAdvanced(a!);
    await expectAdvanced(c!);
    await expectUntouched(zombie!);
  });

  it('moves no run whose step already has a ledger row (insert-recorded) and says so for that run alone', async () => {
    const [a, b] = await claimed(2);
    const bi = (b!.input as { i: number }).i;
    await sql`INSERT INTO ledgerflow.step_effect (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
              VALUES (${b!.id}, 'debit', ${`debit:${bi}`}, '{"debited": -1}'::jsonb, 'recorded', 'transactional', 'earlier', 1, 1, now())`.execute(
      getStore().db,
    );
    const results = await advanceRuns(getStore().db, [debitCommit(a!), debitCommit(b!)]);
    expect(results.map((r) => [r.fenced, r.effectExists])).toEqual([
      [true, false],
      [false, true],
    ]);
    await expectAdvanced(a!);
    const { run, results: stepResults } = await runState(getStore(), b!.id);
    expect(run).toMatchObject({ status: 'running', current_step: 0 });
    expect(stepResults).toEqual([]);
  });

  it('sends a lone commit at once, and groups what arrives while a commit is in flight', async () => {
    const [a, b, zombie] = await claimed(3);
    const queue = new CommitQueue(getStore().db);
    const first = queue.advance(debitCommit(a!));
    // Sent before advance() returned: nothing to wait for.
    expect(queue.stats).toEqual({ statements: 1, commits: 1 });
    const second = queue.advance(debitCommit(b!));
    const third = queue.advance(debitCommit(zombie!, { fencingToken: zombie!.fencingToken + 1 }));
    expect(queue.stats).toEqual({ statements: 1, commits: 1 });
    const results = await Promise.all([first, second, third]);
    // The two that waited went out together, as one statement.
    expect(queue.stats).toEqual({ statements: 2, commits: 3 });
    expect(results.map((r) => r.fenced)).toEqual([true, true, false]);
    await expectAdvanced(a!);
    await expectAdvanced(b!);
    await expectUntouched(zombie!);
  });

  it('retries a group that failed as a whole one commit per statement, so the error reaches only its own run', async () => {
    const [a, b, broken] = await claimed(3);
    const queue = new CommitQueue(getStore().db);
    const first = queue.advance(debitCommit(a!));
    // A result pointing at a ledger row that does not exist: the step_result foreign key refuses it.
    const failing = queue.advance(debitCommit(broken!, { effect: { key: 'no-such-row', mode: 'reference' } }));
    const second = queue.advance(debitCommit(b!));
    await expect(failing).rejects.toThrow(/foreign key/);
    expect((await first).fenced).toBe(true);
    expect((await second).fenced).toBe(true);
    // One alone, one group of two that failed, then those two alone.
    expect(queue.stats).toEqual({ statements: 4, commits: 5 });
    await expectAdvanced(a!);
    await expectAdvanced(b!);
    await expectUntouched(broken!);
  });

  it('fuses one claim into a group for every slot its completions free, and hands the runs to the worker, not the drivers', async () => {
    const store = getStore();
    const runs = await claimed(3);
    const waiting = [await startTestRun(store, grouped, { i: 500 }), await startTestRun(store, grouped, { i: 501 })];
    const asked: number[] = [];
    const adopted: (readonly LeasedRun[] | undefined)[] = [];
    const queue = new CommitQueue(store.db, {
      claims: {
        fusedClaim: (freeing) => {
          asked.push(freeing.length);
          return { registry, options: { workerId: WORKER, leaseMs: 30_000, limit: freeing.length } };
        },
        adopt: (taken) => adopted.push(taken),
      },
    });
    const complete = (run: LeasedRun): AdvanceParams => ({
      ...debitCommit(run),
      continuation: { kind: 'complete', runOutput: { done: true } },
    });
    const results = await Promise.all([
      queue.advance(debitCommit(runs[0]!)),
      queue.advance(complete(runs[1]!)),
      queue.advance(complete(runs[2]!)),
    ]);
    // The lone first commit asks for nothing; the group of two completions claims for both slots.
    expect(asked).toEqual([2]);
    expect(adopted.map((taken) => taken?.map((r) => r.id).sort())).toEqual([[...waiting].sort()]);
    expect(results.map((r) => [r.fenced, r.claimed])).toEqual([
      [true, undefined],
      [true, undefined],
      [true, undefined],
    ]);
    for (const run of runs.slice(1))
      expect((await runState(store, run.id)).run).toMatchObject({ status: 'completed', output: { done: true } });
    for (const id of waiting)
      expect((await runState(store, id)).run).toMatchObject({
        status: 'running',
        lease_owner: WORKER,
        fencing_token: 1,
      });
  });

  it('never puts two commits of one run, or two fused claims, in one statement', async () => {
    const [a, b] = await claimed(2);
    const claimNext = { registry, options: { workerId: WORKER, leaseMs: 30_000, limit: 1 } };
    const complete = (run: LeasedRun): AdvanceParams => ({
      ...debitCommit(run),
      continuation: { kind: 'complete', runOutput: {}, claimNext },
    });
    expect(() => advanceRunsStatement([debitCommit(a!), debitCommit(a!)])).toThrow(/two commits in one group/);
    expect(() => advanceRunsStatement([complete(a!), complete(b!)])).toThrow(
      /at most one commit of a group may carry a fused claim/,
    );
    await expectUntouched(a!);
    await expectUntouched(b!);
  });

  it('leaves the same runs, attempts, results and ledger rows as committing each step alone', async () => {
    const store = getStore();
    // The runs the cases above left held: out of the way of drain().
    await sql`UPDATE ledgerflow.workflow_run SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = now()
               WHERE status = 'running'`.execute(store.db);
    const drain = async (groupCommit: boolean, first: number): Promise<{ rows: unknown[]; groups: number }> => {
      const groups = { n: 0 };
      const spied: Store = { ...store, db: store.db.withPlugin(countGroups(groups)) };
      const ids: string[] = [];
      for (let i = first; i < first + 24; i++) ids.push(await startTestRun(store, grouped, { i }));
      const log = eventLog();
      const worker = createWorker({
        store: spied,
        workflows: [registration],
        concurrency: 8,
        workerId: WORKER,
        reconcileIntervalMs: 0,
        groupCommit,
        onEvent: log.onEvent,
      });
      await worker.drain();
      await worker.stop();
      expect(log.errors()).toEqual([]);
      const rows = [];
      for (const id of ids) {
        const { run, attempts, effects, results } = await runState(store, id);
        rows.push({
          run: [run.status, run.current_step, run.output, run.fencing_token, run.lease_owner],
          attempts: attempts.map((x) => [x.step_name, x.attempt, x.status, x.fencing_token, x.worker_id]),
          effects: effects.map((x) => [
            x.step_name,
            x.idempotency_key.replace(/\d+$/, ''),
            x.status,
            x.kind,
            x.attempt,
            x.fencing_token,
          ]),
          results: results.map((x) => [
            x.step_name,
            x.kind,
            x.attempt,
            x.effect_status,
            x.idempotency_key?.replace(/\d+$/, '') ?? null,
          ]),
        });
      }
      return { rows, groups: groups.n };
    };
    const alone = await drain(false, 1_000);
    const together = await drain(true, 2_000);
    expect(alone.groups).toBe(0);
    expect(together.groups).toBeGreaterThan(0);
    // Outputs depend on the input; everything else is the same run for run.
    const normalize = (rows: unknown[]) =>
      rows.map((r) => JSON.parse(JSON.stringify(r).replace(/"(debited)":\d+/g, '"$1":0')) as unknown);
    expect(normalize(together.rows)).toEqual(normalize(alone.rows));
    expect(together.rows[0]).toMatchObject({
      run: ['completed', 2, { debit: { debited: 20_000 }, notify: { sent: true } }, 1, null],
    });
  });
});

/** Counts the group-commit statements a Kysely instance sends. */
function countGroups(counter: { n: number }): KyselyPlugin {
  // The statement may be wrapped (prepared() puts its mark in front): look into nested raw nodes.
  const isGroup = (node: OperationNode): boolean =>
    node.kind === 'RawNode' &&
    ((node as RawNode).sqlFragments.some((fragment) => fragment.includes('jsonb_to_recordset')) ||
      (node as RawNode).parameters.some(isGroup));
  return {
    transformQuery({ node }) {
      if (isGroup(node)) counter.n += 1;
      return node;
    },
    transformResult: async ({ result }) => result,
  };
}

describe('CommitQueue options', () => {
  it('refuses a group size or an in-flight limit below 1, saying which', () => {
    const db = undefined as never;
    expect(() => new CommitQueue(db, { maxGroup: 0 })).toThrow('CommitQueue: maxGroup must be an integer >= 1 (got 0)');
    expect(() => new CommitQueue(db, { maxInFlight: 1.5 })).toThrow(
      'CommitQueue: maxInFlight must be an integer >= 1 (got 1.5)',
    );
  });
});
