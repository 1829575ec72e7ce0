import { sql } from 'kysely';
import { beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash } from '../../dsl/workflow-shape.js';
import { workflow, type AnyWorkflow } from '../../dsl/workflow.js';
import { createClient, type Client } from '../../runtime/client/client.js';
import { bindHandlers } from '../../runtime/contracts/registration.js';
import {
  ConflictError,
  DuplicateRunError,
  NonRetryableError,
  RunPrunedError,
  ValidationError,
} from '../../runtime/errors.js';
import { retryRunStatement } from '../../runtime/client/operator/retry.js';
import { notFound } from '../../runtime/contracts/handler-types.js';
import { pruneBatchStatement } from '../../runtime/retention/run-prune-statements.js';
import { pruneRuns } from '../../runtime/retention/prune.js';
import type { PruneBatch } from '../../runtime/retention/prune-options.js';
import { FINAL_RUN_STATUSES } from '../../runtime/store/tables.js';
import type { Store } from '../../runtime/store/store.js';
import type { RunStatus } from '../../runtime/store/tables.js';
import { createWorker } from '../../runtime/worker/worker.js';
import type { WorkerEvent } from '../../runtime/worker/worker-events.js';
import { describeStores } from '../support/describe-stores.js';
import { runCli } from '../support/run-cli.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { doubler, fanOut, WAIT_WORKFLOWS, waitHandlers } from './fixtures/wait-workflows.js';
import { waitUntil } from './fixtures/run-helpers.js';

const DAY = 86_400_000;
const fast = { initialDelayMs: 20, maxDelayMs: 200, backoffFactor: 2, jitter: 0 } as const;

/** A charge at a provider that does NOT dedupe: a second run for the same order charges twice. */
const order = workflow('pr-order', { version: 1, input: z.object({ orderId: z.string(), cents: z.number().int() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    performTimeoutMs: 1_000,
    retry: { ...fast, maxAttempts: 2 },
  })
  .step('done', { output: z.object({ ok: z.boolean() }) });

/** What seeded runs (written by SQL in any status) belong to: no worker of these tests serves it. */
const seeded = workflow('pr-seed', { version: 1, input: z.object({}) }).external('charge', {
  output: z.object({}),
  key: () => 'seed',
  performTimeoutMs: 1_000,
});

const WORKFLOWS: readonly AnyWorkflow[] = [order, seeded, ...WAIT_WORKFLOWS];

/** The provider: every charge it was asked to make, by key. */
function provider() {
  const charges: string[] = [];
  const registration = bindHandlers(
    order,
    {
      charge: {
        perform: async ({ key }) => {
          charges.push(key);
          return { chargeId: `ch_${key.slice('charge:'.length)}` };
        },
        reconcile: async () => notFound(),
      },
      done: () => ({ ok: true }),
    },
    shapeHash(order),
  );
  return { charges, registration };
}

async function drain(store: Store, registrations: Parameters<typeof createWorker>[0]['workflows']): Promise<void> {
  const worker = createWorker({ store, workflows: registrations, pollIntervalMs: 20, reconcileIntervalMs: 0 });
  try {
    await worker.drain({ timeoutMs: 20_000 });
  } finally {
    await worker.stop();
  }
}

/** Moves runs' finish `days` into the past, as if they had finished then. */
async function age(store: Store, ids: readonly string[], days: number): Promise<void> {
  await sql`UPDATE ledgerflow.workflow_run SET finished_at = finished_at - ${days * DAY}::double precision * interval '1 millisecond'
             WHERE id = ANY(${[...ids]}::uuid[])`.execute(store.db);
}

interface Seed {
  readonly status: RunStatus;
  /** Why the run compensates (or did): required for compensated and compensation_failed (core 0013). */
  readonly compensation?: 'failure' | 'cancel';
  /** How long ago it finished (final statuses only). */
  readonly finishedDaysAgo?: number;
  readonly parent?: string;
  readonly openIntent?: boolean;
  readonly dedupeKey?: string;
  /** Default pr-seed. */
  readonly workflow?: string;
  readonly input?: object;
}

/** Writes a run in any status directly (the states a worker would leave), returning its id. */
async function seed(store: Store, s: Seed): Promise<string> {
  const final = (FINAL_RUN_STATUSES as readonly RunStatus[]).includes(s.status);
  const { rows } = await sql<{ id: string }>`
    INSERT INTO ledgerflow.workflow_run
           (id, workflow_name, workflow_version, status, input, dedupe_key, finished_at, lease_owner, lease_expires_at,
            waiting_for, parent_run_id, parent_step, parent_index, compensation)
    SELECT gen_random_uuid(), ${s.workflow ?? 'pr-seed'}, 1, ${s.status}, ${JSON.stringify(s.input ?? {})}::jsonb, ${s.dedupeKey ?? null}::text,
           CASE WHEN ${final} THEN statement_timestamp() - ${(s.finishedDaysAgo ?? 0) * DAY}::double precision * interval '1 millisecond' END,
           CASE WHEN ${s.status} = 'running' THEN 'seed-worker' END,
           CASE WHEN ${s.status} = 'running' THEN statement_timestamp() + interval '1 hour' END,
           CASE WHEN ${s.status} = 'waiting' THEN '{"kind":"sleep","step":"charge","until":"2100-01-01T00:00:00Z"}'::jsonb END,
           ${s.parent ?? null}::uuid, CASE WHEN ${s.parent ?? null}::uuid IS NOT NULL THEN 'charge' END,
           CASE WHEN ${s.parent ?? null}::uuid IS NOT NULL THEN (SELECT count(*) FROM ledgerflow.workflow_run WHERE parent_run_id = ${s.parent ?? null}::uuid)::int END,
           ${s.compensation ?? null}::text
    RETURNING id`.execute(store.db);
  const id = rows[0]!.id;
  if (s.openIntent === true) {
    await sql`INSERT INTO ledgerflow.step_effect
                     (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, reconcile_after)
              VALUES (${id}, 'charge', ${`charge:${id}`}, 'null'::jsonb, 'intent', 'external', 'h', 1, 1, statement_timestamp() + interval '1 hour')`.execute(
      store.db,
    );
  }
  return id;
}

async function liveIds(store: Store, ids: readonly string[]): Promise<string[]> {
  const { rows } = await sql<{
    id: string;
  }>`SELECT id FROM ledgerflow.workflow_run WHERE id = ANY(${[...ids]}::uuid[]) ORDER BY id`.execute(store.db);
  return rows.map((r) => r.id);
}

async function count(store: Store, table: string, where = sql`true`): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE ${where}`.execute(
    store.db,
  );
  return rows[0]!.n;
}

const NOTE = { actor: 'ana', reason: 'provider fixed (INC-24)' } as const;

/**
 * The wait fixtures' handlers, with a doubler that refuses its `fail` items only while `flaky.broken`
 * — once every sibling of its run has finished: the parent's failure would otherwise cancel a
 * sibling still running (the two children run at once, and which commits first is a race).
 */
function flakyChildren(store: Store): {
  flaky: { broken: boolean };
  registrations: Parameters<typeof createWorker>[0]['workflows'];
} {
  const flaky = { broken: true };
  const siblingsUnfinished = async (runId: string): Promise<number> => {
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n
        FROM ledgerflow.workflow_run me
        JOIN ledgerflow.workflow_run s ON s.parent_run_id = me.parent_run_id AND s.id <> me.id
       WHERE me.id = ${runId} AND s.status <> ALL(${[...FINAL_RUN_STATUSES]}::text[])`.execute(store.db);
    return rows[0]!.n;
  };
  const child = bindHandlers(
    doubler,
    {
      double: async ({ input, runId }) => {
        if (input.fail && flaky.broken) {
          await waitUntil(
            'the failing child’s siblings to finish',
            async () => (await siblingsUnfinished(runId)) === 0,
          );
          throw new NonRetryableError(`refusing ${input.n}`);
        }
        return { value: input.n * 2 };
      },
    },
    shapeHash(doubler),
  );
  return { flaky, registrations: [...waitHandlers().filter((r) => r.workflow !== doubler), child] };
}

/** A fan-out over [1, 2] whose second child failed, so the parent failed: ids by parent_index. */
async function failedFanOut(
  store: Store,
  client: Client,
  id: string,
  registrations: Parameters<typeof createWorker>[0]['workflows'],
) {
  const { runId } = await client.start(fanOut, { id, count: 2, failAt: 2 });
  await drain(store, registrations);
  const children = (await client.listRuns({ parentRunId: runId })).sort((a, b) => a.parent_index! - b.parent_index!);
  expect(children.map((c) => c.status)).toEqual(['completed', 'failed']);
  expect((await client.getRun(runId)).status).toBe('failed');
  return { parent: runId, done: children[0]!.id, failed: children[1]!.id };
}

describeStores('prune', (getStore, kind) => {
  let client: Client;
  beforeAll(async () => {
    await migrateForTest(getStore(), WORKFLOWS);
    client = createClient({ store: getStore(), workflows: [order] });
  });

  it('prunes old finished runs (a fan-out tree too) and nothing else; the archive keeps their identity and recorded effects', async () => {
    const store = getStore();
    const { charges, registration } = provider();
    const a = await client.start(order, { orderId: 'keep-1', cents: 100 }, { dedupeKey: 'keep-1' });
    const b = await client.start(order, { orderId: 'keep-2', cents: 200 });
    const tree = await client.start(fanOut, { id: 'pr-tree', count: 3, failAt: -1 });
    const recent = await client.start(order, { orderId: 'recent', cents: 300 });
    await drain(store, [registration, ...waitHandlers()]);
    expect([...charges].sort()).toEqual(['charge:keep-1', 'charge:keep-2', 'charge:recent']);
    const children = (await client.listRuns({ parentRunId: tree.runId })).map((r) => r.id);
    expect(children).toHaveLength(3);
    const old = [a.runId, b.runId, tree.runId, ...children];
    await age(store, old, 40);

    const stays = {
      pending: await seed(store, { status: 'pending' }),
      running: await seed(store, { status: 'running' }),
      waiting: await seed(store, { status: 'waiting' }),
      parked: await seed(store, { status: 'needs_reconciliation' }),
      failedWithIntent: await seed(store, { status: 'failed', finishedDaysAgo: 40, openIntent: true }),
      cancelledWithIntent: await seed(store, { status: 'cancelled', finishedDaysAgo: 40, openIntent: true }),
      recentCompleted: recent.runId,
      recentFailed: await seed(store, { status: 'failed', finishedDaysAgo: 29 }),
    };
    // A parent whose child is unfinished, and one whose child keeps an open intent: all four stay.
    const parentOfUnfinished = await seed(store, { status: 'completed', finishedDaysAgo: 40 });
    const unfinishedChild = await seed(store, { status: 'pending', parent: parentOfUnfinished });
    const parentOfStuck = await seed(store, { status: 'failed', finishedDaysAgo: 40 });
    const stuckChild = await seed(store, {
      status: 'failed',
      finishedDaysAgo: 40,
      parent: parentOfStuck,
      openIntent: true,
    });
    // An old finished child of a parent that is still running: the parent will read its output.
    const runningParent = await seed(store, { status: 'running' });
    const finishedChild = await seed(store, { status: 'completed', finishedDaysAgo: 40, parent: runningParent });
    const mustStay = [
      ...Object.values(stays),
      parentOfUnfinished,
      unfinishedChild,
      parentOfStuck,
      stuckChild,
      runningParent,
      finishedChild,
    ];
    // Pruned too: an old cancelled run without an intent.
    const oldCancelled = await seed(store, { status: 'cancelled', finishedDaysAgo: 31 });

    const batches: PruneBatch[] = [];
    const report = await pruneRuns(store.db, { olderThanMs: 30 * DAY, batchSize: 2, onBatch: (b) => batches.push(b) });

    const pruned = [...old, oldCancelled];
    expect(report).toMatchObject({
      dryRun: false,
      runsPruned: pruned.length,
      effectsArchived: 2,
      archiveDeleted: 0,
      stopped: false,
    });
    expect(batches.every((x) => x.table === 'runs' && x.runs >= 1 && x.runs <= 2)).toBe(true);
    expect(report.batches).toBe(batches.length);
    expect(await liveIds(store, pruned)).toEqual([]);
    expect(await liveIds(store, mustStay)).toEqual([...mustStay].sort());
    // Attempts, results and ledger rows of pruned runs are gone from the live tables.
    const gone = sql`${sql.ref('run_id')} = ANY(${pruned}::uuid[])`;
    expect(await count(store, 'ledgerflow.step_attempt', gone)).toBe(0);
    expect(await count(store, 'ledgerflow.step_result', gone)).toBe(0);
    expect(await count(store, 'ledgerflow.step_effect', sql`workflow_id = ANY(${pruned}::uuid[])`)).toBe(0);
    // The archive holds their identity …
    const archived = await store.db
      .selectFrom('ledgerflow.run_archive')
      .selectAll()
      .where('id', 'in', pruned)
      .execute();
    expect(archived).toHaveLength(pruned.length);
    const archivedA = archived.find((r) => r.id === a.runId)!;
    expect(archivedA).toMatchObject({
      workflow_name: 'pr-order',
      workflow_version: 1,
      dedupe_key: 'keep-1',
      status: 'completed',
    });
    expect(
      archived
        .filter((r) => r.parent_run_id === tree.runId)
        .map((r) => r.id)
        .sort(),
    ).toEqual([...children].sort());
    // … and their recorded effects: step, key, effect, request hash.
    const effects = await store.db
      .selectFrom('ledgerflow.effect_archive')
      .selectAll()
      .orderBy('idempotency_key')
      .execute();
    expect(effects.map((e) => [e.run_id, e.step_name, e.idempotency_key, e.kind, e.effect])).toEqual([
      [a.runId, 'charge', 'charge:keep-1', 'external', { chargeId: 'ch_keep-1' }],
      [b.runId, 'charge', 'charge:keep-2', 'external', { chargeId: 'ch_keep-2' }],
    ]);
    expect(effects.every((e) => /^[0-9a-f]{64}$/.test(e.request_hash) && e.recorded_at instanceof Date)).toBe(true);

    // A second pass finds nothing more: everything left must stay.
    const again = await pruneRuns(store.db, { olderThanMs: 30 * DAY });
    expect(again).toMatchObject({ runsPruned: 0, batches: 0 });
  });

  it('a start with the dedupe key or the run id of a pruned run creates no run, calls no provider, and returns the archived run', async () => {
    const store = getStore();
    const { charges, registration } = provider();
    const byKey = await client.start(order, { orderId: 'o-42', cents: 4200 }, { dedupeKey: 'order-42' });
    const ownId = '6f1e0c1a-3b57-4c2e-9a55-0d6b5b1f0042';
    await client.start(order, { orderId: 'o-43', cents: 4300 }, { runId: ownId });
    await drain(store, [registration]);
    expect([...charges].sort()).toEqual(['charge:o-42', 'charge:o-43'].sort());
    await age(store, [byKey.runId, ownId], 31);
    expect((await pruneRuns(store.db, { olderThanMs: 30 * DAY })).runsPruned).toBeGreaterThanOrEqual(2);
    const before = await count(store, 'ledgerflow.workflow_run');

    const again = await client.start(order, { orderId: 'o-42', cents: 4200 }, { dedupeKey: 'order-42' });
    expect(again).toMatchObject({
      runId: byKey.runId,
      created: false,
      pruned: { id: byKey.runId, status: 'completed', dedupeKey: 'order-42' },
    });
    const sameId = await client.start(order, { orderId: 'o-43', cents: 4300 }, { runId: ownId.toUpperCase() });
    expect(sameId).toMatchObject({ runId: ownId, created: false, pruned: { status: 'completed' } });
    // Inside a caller's transaction too, and the transaction goes on.
    const inTx = await store.db.transaction().execute(async (trx) => {
      const started = await client.startInTransaction(
        trx,
        order,
        { orderId: 'o-42', cents: 4200 },
        { dedupeKey: 'order-42' },
      );
      await sql`SELECT 1`.execute(trx);
      return started;
    });
    expect(inTx).toMatchObject({ runId: byKey.runId, created: false });
    // The rules of a live run hold: another input is refused, unless the caller asks for the run anyway.
    await expect(client.start(order, { orderId: 'o-42', cents: 1 }, { dedupeKey: 'order-42' })).rejects.toThrow(
      DuplicateRunError,
    );
    await expect(
      client.start(
        order,
        { orderId: 'o-42', cents: 1 },
        { dedupeKey: 'order-42', onDifferentInput: 'return-existing' },
      ),
    ).resolves.toMatchObject({
      runId: byKey.runId,
      created: false,
    });
    await expect(client.start(fanOut, { id: 'x', count: 1, failAt: -1 }, { runId: ownId })).rejects.toThrow(
      /belongs to a run of workflow "pr-order" \(pruned/,
    );

    expect(await count(store, 'ledgerflow.workflow_run')).toBe(before);
    await drain(store, [registration]);
    expect([...charges].sort()).toEqual(['charge:o-42', 'charge:o-43'].sort());

    // What the client says about a pruned run.
    const error = await client.getRun(byKey.runId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RunPrunedError);
    expect((error as RunPrunedError).run).toMatchObject({
      id: byKey.runId,
      workflowName: 'pr-order',
      status: 'completed',
    });
    expect((error as Error).message).toMatch(/completed at .* and was pruned at/);
    await expect(client.waitForRun(byKey.runId, { timeoutMs: 100 })).rejects.toThrow(RunPrunedError);
    await expect(client.cancel(byKey.runId)).resolves.toBe(false);
  });

  it("keeps the children a failed parent reads again on retry: the retried parent completes with every child's result", async () => {
    const store = getStore();
    const { flaky, registrations } = flakyChildren(store);
    const tree = await failedFanOut(store, client, 'pr-retry-1', registrations);
    await age(store, [tree.parent, tree.done, tree.failed], 40);

    // `--statuses completed` keeps failed runs, so the failed parent stays retryable: its completed child stays with it.
    expect(
      (await pruneRuns(store.db, { olderThanMs: 30 * DAY, statuses: ['completed'], dryRun: true })).runsPruned,
    ).toBe(0);
    expect((await pruneRuns(store.db, { olderThanMs: 30 * DAY, statuses: ['completed'] })).runsPruned).toBe(0);
    expect(await liveIds(store, [tree.done])).toEqual([tree.done]);

    flaky.broken = false;
    await client.retryRun(tree.failed, NOTE);
    await drain(store, registrations);
    await client.retryRun(tree.parent, NOTE);
    await drain(store, registrations);
    const parent = await client.getRun(tree.parent);
    expect(parent).toMatchObject({
      status: 'completed',
      output: { double: [{ value: 2 }, { value: 4 }], sum: { total: 6 } },
    });

    // Completed, the parent is retried no more: the whole tree goes, children first.
    await age(store, [tree.parent, tree.failed], 40);
    expect((await pruneRuns(store.db, { olderThanMs: 30 * DAY, statuses: ['completed'] })).runsPruned).toBe(3);
    expect(await liveIds(store, [tree.parent, tree.done, tree.failed])).toEqual([]);
  });

  it('a failed parent whose children were pruned is not retried; a retry that gets through anyway fails loudly, never completing with fewer results', async () => {
    const store = getStore();
    const { flaky, registrations } = flakyChildren(store);
    const tree = await failedFanOut(store, client, 'pr-retry-2', registrations);
    await age(store, [tree.parent, tree.failed], 40);
    await age(store, [tree.done], 41);
    // Every status: the parent may go too, so its children go first — and the pass stops after one batch.
    const stop = new AbortController();
    const report = await pruneRuns(store.db, {
      olderThanMs: 30 * DAY,
      batchSize: 1,
      signal: stop.signal,
      onBatch: () => stop.abort(),
    });
    expect(report).toMatchObject({ runsPruned: 1, stopped: true });
    expect(await liveIds(store, [tree.parent, tree.done, tree.failed])).toEqual([tree.parent, tree.failed].sort());

    flaky.broken = false;
    await client.retryRun(tree.failed, NOTE);
    await drain(store, registrations);
    const refused = await client.retryRun(tree.parent, NOTE).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConflictError);
    expect((refused as Error).message).toContain(`its children were pruned (${tree.done})`);
    expect((await client.getRun(tree.parent)).status).toBe('failed');

    // The statement alone, as a retry racing the prune would leave it: the step sees a child missing and fails.
    await retryRunStatement(tree.parent, 'double').execute(store.db);
    await drain(store, registrations);
    const parent = await client.getRun(tree.parent);
    expect(parent.status).toBe('failed');
    expect(parent.output).toBeNull();
    expect(JSON.stringify(parent.error)).toContain('child 0 of step \\"double\\" was pruned: its output is gone');
  });

  it('a retried parent whose last child was pruned fails naming it, rather than starting it again', async () => {
    const store = getStore();
    const { registrations } = flakyChildren(store);
    const tree = await failedFanOut(store, client, 'pr-retry-3', registrations);
    await age(store, [tree.parent, tree.done], 40);
    await age(store, [tree.failed], 41);
    const stop = new AbortController();
    await pruneRuns(store.db, {
      olderThanMs: 30 * DAY,
      batchSize: 1,
      signal: stop.signal,
      onBatch: () => stop.abort(),
    });
    expect(await liveIds(store, [tree.parent, tree.done, tree.failed])).toEqual([tree.parent, tree.done].sort());
    await expect(client.retryRun(tree.parent, NOTE)).rejects.toThrow(`its children were pruned (${tree.failed})`);

    await retryRunStatement(tree.parent, 'double').execute(store.db);
    await drain(store, registrations);
    const parent = await client.getRun(tree.parent);
    expect(parent.status).toBe('failed');
    expect(parent.error).toMatchObject({ name: 'ChildPrunedError' });
    expect(JSON.stringify(parent.error)).toContain(`child 1 (run ${tree.failed}) of step \\"double\\" was pruned`);
  });

  it('a child step whose key names a pruned run of the child workflow is a conflict, as it was before the prune', async () => {
    const store = getStore();
    const parent = await seed(store, { status: 'running' });
    const archived = await seed(store, { status: 'completed', finishedDaysAgo: 40, dedupeKey: 'child-key-1' });
    await pruneRuns(store.db, { olderThanMs: 30 * DAY });
    expect(await liveIds(store, [archived])).toEqual([]);
    const insertChild = sql`INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, dedupe_key, parent_run_id, parent_step, parent_index)
                            VALUES (gen_random_uuid(), 'pr-seed', 1, '{}'::jsonb, 'child-key-1', ${parent}, 'charge', 0)`;
    const error = await insertChild.execute(store.db).catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe('23505');
  });

  it('bounds every batch; concurrent passes take disjoint runs and neither blocks', async () => {
    const store = getStore();
    await sql`INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, status, input, finished_at)
              SELECT gen_random_uuid(), 'pr-seed', 1, 'completed', '{}'::jsonb, statement_timestamp() - interval '60 days' - i * interval '1 second'
                FROM generate_series(1, 450) AS i`.execute(store.db);
    const sizes: number[][] = [[], []];
    const reports = await Promise.all(
      [0, 1].map((pass) =>
        pruneRuns(store.db, { olderThanMs: 50 * DAY, batchSize: 100, onBatch: (b) => sizes[pass]!.push(b.runs) }),
      ),
    );
    const all = sizes.flat();
    expect(Math.max(...all)).toBeLessThanOrEqual(100);
    expect(reports[0]!.runsPruned + reports[1]!.runsPruned).toBe(450);
    expect(all.reduce((s, n) => s + n, 0)).toBe(450);
    expect(
      await count(store, 'ledgerflow.workflow_run', sql`finished_at < statement_timestamp() - interval '50 days'`),
    ).toBe(0);
    if (kind === 'pg') {
      // Neither blocks: a pass skips the runs another session holds (SKIP LOCKED) and prunes the
      // rest. (Whether both passes above found work is up to the scheduler: one may finish first.)
      const ids = await sql<{ id: string }>`
        INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, status, input, finished_at)
        SELECT gen_random_uuid(), 'pr-seed', 1, 'completed', '{}'::jsonb, statement_timestamp() - interval '60 days'
          FROM generate_series(1, 10)
        RETURNING id`.execute(store.db);
      const held = ids.rows.slice(0, 4).map((r) => r.id);
      const whileHeld = await store.db.transaction().execute(async (trx) => {
        await sql`SELECT id FROM ledgerflow.workflow_run WHERE id = ANY(${held}::uuid[]) FOR UPDATE`.execute(trx);
        return Promise.race([
          pruneRuns(store.db, { olderThanMs: 50 * DAY, batchSize: 3 }),
          new Promise<never>((_, reject) =>
            setTimeout(() => reject(new Error('a prune pass waited for runs another session holds')), 10_000),
          ),
        ]);
      });
      expect(whileHeld.runsPruned).toBe(6);
      expect((await pruneRuns(store.db, { olderThanMs: 50 * DAY })).runsPruned).toBe(4);
    }
  });

  it('a dry run counts what a pass would prune and deletes nothing; the signal stops a pass between batches', async () => {
    const store = getStore();
    const parent = await seed(store, { status: 'completed', finishedDaysAgo: 70 });
    for (let i = 0; i < 3; i++) await seed(store, { status: 'completed', finishedDaysAgo: 70, parent });
    await seed(store, { status: 'failed', finishedDaysAgo: 70, openIntent: true });
    const before = await count(store, 'ledgerflow.workflow_run');
    const dry = await pruneRuns(store.db, { olderThanMs: 60 * DAY, batchSize: 2, dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, runsPruned: 4, effectsArchived: 0 });
    expect(await count(store, 'ledgerflow.workflow_run')).toBe(before);

    const controller = new AbortController();
    const stopped = await pruneRuns(store.db, {
      olderThanMs: 60 * DAY,
      batchSize: 1,
      signal: controller.signal,
      onBatch: () => controller.abort(),
    });
    expect(stopped).toMatchObject({ runsPruned: 1, batches: 1, stopped: true });
    const rest = await pruneRuns(store.db, { olderThanMs: 60 * DAY, batchSize: 1 });
    expect(rest.runsPruned).toBe(3);
  });

  it('deletes tombstones older than archiveOlderThanMs, after which the key starts a new run', async () => {
    const store = getStore();
    const old = await seed(store, {
      status: 'completed',
      finishedDaysAgo: 400,
      dedupeKey: 'ancient',
      workflow: 'pr-order',
      input: { orderId: 'seeded', cents: 1 },
    });
    await pruneRuns(store.db, { olderThanMs: 30 * DAY });
    expect(await count(store, 'ledgerflow.run_archive', sql`id = ${old}`)).toBe(1);
    const dry = await pruneRuns(store.db, { olderThanMs: 30 * DAY, archiveOlderThanMs: 365 * DAY, dryRun: true });
    expect(dry.archiveDeleted).toBeGreaterThanOrEqual(1);
    expect(await count(store, 'ledgerflow.run_archive', sql`id = ${old}`)).toBe(1);
    const report = await pruneRuns(store.db, { olderThanMs: 30 * DAY, archiveOlderThanMs: 365 * DAY });
    expect(report.archiveDeleted).toBeGreaterThanOrEqual(1);
    expect(
      await count(store, 'ledgerflow.run_archive', sql`finished_at < statement_timestamp() - interval '365 days'`),
    ).toBe(0);
    const started = await client.start(order, { orderId: 'seeded', cents: 1 }, { dedupeKey: 'ancient' });
    expect(started.created).toBe(true);
  });

  it('refuses bad options before touching anything', async () => {
    const db = getStore().db;
    const problems = async (options: Parameters<typeof pruneRuns>[1]) =>
      pruneRuns(db, options).then(
        () => [],
        (e: unknown) => (e instanceof ValidationError ? e.issues : [String(e)]),
      );
    expect(await problems({ olderThanMs: -1 })).toEqual([
      'olderThanMs: must be a number of milliseconds >= 0 (got -1)',
    ]);
    expect(await problems({ olderThanMs: DAY, batchSize: 0 })).toEqual([
      'batchSize: must be an integer from 1 to 10000 (got 0)',
    ]);
    expect(await problems({ olderThanMs: DAY, statuses: ['running' as 'failed'] })).toEqual([
      'statuses: "running" is not a final status; only completed, failed, cancelled, compensated, compensation_failed runs are ever pruned',
    ]);
    expect(await problems({ olderThanMs: 30 * DAY, archiveOlderThanMs: DAY })).toEqual([
      'archiveOlderThanMs: must be at least olderThanMs (2592000000); got 86400000. The archive is what protects the keys of pruned runs: it must outlive them',
    ]);
  });

  it('a worker with retention prunes on its interval and reports the pass', async () => {
    const store = getStore();
    const old = await seed(store, { status: 'completed', finishedDaysAgo: 45 });
    const young = await seed(store, { status: 'completed', finishedDaysAgo: 5 });
    const events: WorkerEvent[] = [];
    const { registration } = provider();
    expect(() => createWorker({ store, workflows: [registration], retention: { completedOlderThanMs: -1 } })).toThrow(
      /retention.completedOlderThanMs must be a number of milliseconds >= 0 \(got -1\)/,
    );
    expect(() =>
      createWorker({
        store,
        workflows: [registration],
        retention: { completedOlderThanMs: DAY, eventsOlderThanMs: Number.NaN },
      }),
    ).toThrow(/retention.eventsOlderThanMs must be a number of milliseconds >= 0 \(got NaN\)/);
    const worker = createWorker({
      store,
      workflows: [registration],
      pollIntervalMs: 50,
      reconcileIntervalMs: 0,
      retention: { completedOlderThanMs: 30 * DAY, intervalMs: 50, batchSize: 10 },
      onEvent: (e) => events.push(e),
    });
    await worker.start();
    try {
      const deadline = Date.now() + 10_000;
      while (!events.some((e) => e.type === 'prune-pass') && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 25));
    } finally {
      await worker.stop();
    }
    const pass = events.find((e) => e.type === 'prune-pass');
    expect(pass).toMatchObject({ type: 'prune-pass', report: { dryRun: false, stopped: false } });
    expect(events.filter((e) => e.type === 'error')).toEqual([]);
    expect(await liveIds(store, [old, young])).toEqual([young]);
  });

  it('ledgerflow prune: durations, a dry run and a pass, as text and JSON', async () => {
    const store = getStore();
    const run = runCli;
    const bad = await run(['prune', '--completed-older-than', '30 days']);
    expect(bad).toMatchObject({ code: 2, stdout: '' });
    expect(bad.stderr).toContain(
      '--completed-older-than must be a whole number with a unit: d, h, m, s or ms, like 30d, 12h or 90m (got "30 days")',
    );
    expect((await run(['prune'])).stderr).toContain('--completed-older-than <duration> is required');
    expect((await run(['prune', '--completed-older-than', '30d', '--archive-older-than', '12h'])).stderr).toContain(
      '--archive-older-than (12h) must be at least --completed-older-than (30d)',
    );
    if (kind !== 'pg') return; // The CLI opens its own connection: PostgreSQL by URL (the PGlite store here lives in memory).
    const ids = [
      await seed(store, { status: 'cancelled', finishedDaysAgo: 500 }),
      await seed(store, { status: 'failed', finishedDaysAgo: 500 }),
    ];
    const url = ['--database-url', store.url!];
    const dry = await run(['prune', '--completed-older-than', '400d', '--dry-run', ...url]);
    expect(dry).toMatchObject({ code: 0, stderr: '' });
    expect(dry.stdout).toMatch(
      /^2 run\(s\) would be pruned, 0 recorded effect\(s\) to archive — 1 batch\(es\), \d+ ms\.\n$/,
    );
    expect(await liveIds(store, ids)).toEqual([...ids].sort());
    const done = await run(['prune', '--completed-older-than', '400d', '--batch-size', '1', '--json', ...url]);
    expect(done.code).toBe(0);
    expect(JSON.parse(done.stdout)).toMatchObject({ dryRun: false, runsPruned: 2, batches: 2, stopped: false });
    expect(await liveIds(store, ids)).toEqual([]);
  });

  it('prunes compensated and compensation_failed runs like other finished runs; one with an open intent, or still compensating, stays', async () => {
    const store = getStore();
    const compensated = await seed(store, { status: 'compensated', compensation: 'failure', finishedDaysAgo: 400 });
    const compensationFailed = await seed(store, {
      status: 'compensation_failed',
      compensation: 'cancel',
      finishedDaysAgo: 400,
    });
    const stays = [
      await seed(store, {
        status: 'compensation_failed',
        compensation: 'failure',
        finishedDaysAgo: 400,
        openIntent: true,
      }),
      await seed(store, { status: 'compensated', compensation: 'failure', finishedDaysAgo: 300 }),
      await seed(store, { status: 'pending', compensation: 'failure' }),
      await seed(store, { status: 'running', compensation: 'cancel' }),
    ];
    const report = await pruneRuns(store.db, { olderThanMs: 350 * DAY });
    expect(report.runsPruned).toBe(2);
    expect(await liveIds(store, [compensated, compensationFailed])).toEqual([]);
    expect(await liveIds(store, stays)).toEqual([...stays].sort());
    const archived = await store.db
      .selectFrom('ledgerflow.run_archive')
      .select(['id', 'status'])
      .where('id', 'in', [compensated, compensationFailed])
      .execute();
    expect(new Map(archived.map((r) => [r.id, r.status]))).toEqual(
      new Map([
        [compensated, 'compensated'],
        [compensationFailed, 'compensation_failed'],
      ]),
    );
    // `statuses` narrows to one of them.
    const narrowed = await seed(store, {
      status: 'compensation_failed',
      compensation: 'failure',
      finishedDaysAgo: 400,
    });
    const other = await seed(store, { status: 'compensated', compensation: 'failure', finishedDaysAgo: 400 });
    expect((await pruneRuns(store.db, { olderThanMs: 350 * DAY, statuses: ['compensation_failed'] })).runsPruned).toBe(
      1,
    );
    expect(await liveIds(store, [narrowed, other])).toEqual([other]);
  });

  if (kind === 'pg') {
    it('a start racing a prune of its run waits for it and returns the archived run', async () => {
      const store = getStore();
      const id = await seed(store, {
        status: 'completed',
        finishedDaysAgo: 90,
        dedupeKey: 'race-1',
        workflow: 'pr-order',
        input: { orderId: 'race', cents: 5 },
      });
      let start: Promise<unknown> | undefined;
      let settled = false;
      await store.db.transaction().execute(async (trx) => {
        // The batch has locked and deleted the run, not committed yet.
        const batch = await pruneBatchStatement({
          olderThanMs: 80 * DAY,
          batchSize: 1_000,
          statuses: ['completed'],
        }).execute(trx);
        expect(batch.rows[0]!.runs).toBeGreaterThanOrEqual(1);
        start = client
          .start(order, { orderId: 'race', cents: 5 }, { dedupeKey: 'race-1' })
          .finally(() => (settled = true));
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(settled).toBe(false);
      });
      await expect(start).resolves.toMatchObject({ runId: id, created: false, pruned: { status: 'completed' } });
      expect(await count(store, 'ledgerflow.workflow_run', sql`dedupe_key = 'race-1'`)).toBe(0);
    });
  }
});
