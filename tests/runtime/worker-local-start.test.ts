import { sql, type KyselyPlugin } from 'kysely';
import { insertRunStatement } from '../../runtime/client/insert-run.js';
import { claimRuns } from '../../runtime/worker/claim.js';
import { toLeasedRun } from '../../runtime/store/leased-run.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { shapeHash } from 'ledgerflow/dsl';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { bindHandlers, createClient, createWorker, type Store, type Worker } from 'ledgerflow/runtime';
import { RUNS_CHANNEL } from 'ledgerflow/schema';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { eventLog, runState, waitUntil } from './fixtures/run-helpers.js';
import { poison, poisonHandlers } from './fixtures/poison-workflows.js';

/**
 * The start path. A client given the worker of its process starts its runs already claimed for
 * that worker — one statement, one commit, no NOTIFY — writing exactly what the claim statement
 * writes on a run it takes (the one claim path's rows, checked below); a NOTIFY
 * makes a worker claim only when it has a slot free, and a run that ends wakes the loop only
 * when a NOTIFY found no slot free. The poll is ten minutes: a run that completes here was
 * taken by a start's claim, a notification, or a freed slot after a missed one — never a poll.
 */
const NO_POLL = { pollIntervalMs: 600_000, reconcileIntervalMs: 0 } as const;

/**
 * The store, recording every statement it runs and every notification its subscriptions receive;
 * `failNextStartClaim('before')` makes the next start's claimed insert throw before it is sent;
 * `'after'`, once it ran (committed, its answer lost: an outcome the start cannot know).
 */
function observed(base: Store): {
  store: Store;
  statements: string[];
  notifications: string[];
  failNextStartClaim: (when: 'before' | 'after') => void;
} {
  const statements: string[] = [];
  const notifications: string[] = [];
  const failing = new Set<unknown>();
  let failNext: 'before' | 'after' | undefined;
  const recorder: KyselyPlugin = {
    transformQuery: ({ node, queryId }) => {
      const text = base.db.getExecutor().compileQuery(node, queryId).sql;
      statements.push(text);
      if (failNext !== undefined && isStartClaim(text)) {
        const when = failNext;
        failNext = undefined;
        if (when === 'before') throw new Error('start claim failed (test)');
        failing.add(queryId);
      }
      return node;
    },
    transformResult: async ({ result, queryId }) => {
      if (failing.delete(queryId)) throw new Error('start claim failed (test)');
      return result;
    },
  };
  return {
    statements,
    notifications,
    failNextStartClaim: (when) => (failNext = when),
    store: {
      ...base,
      db: base.db.withPlugin(recorder),
      listen: (channel, onNotify, onLost, options) =>
        base.listen(
          channel,
          (payload) => {
            if (channel === RUNS_CHANNEL) notifications.push(payload);
            onNotify(payload);
          },
          onLost,
          options,
        ),
    },
  };
}

const isLoopClaim = (s: string): boolean => /\bclaimed AS\b/.test(s) && /\bexpired AS\b/.test(s);
/** A start's insert of a run already leased to the worker of its process (`claimedBy`). */
const isStartClaim = (s: string): boolean => /INSERT INTO ledgerflow\.workflow_run \([^)]*lease_owner/.test(s);
/** A `startAndWait`'s insert of a run whose only step is plain: the run inserted already completed (insert-run.ts). */
const isCompletedInsert = (s: string): boolean =>
  /INSERT INTO ledgerflow\.workflow_run \([^)]*status[^)]*\)\s*SELECT[^;]*'completed'/.test(s);

type LeasedRunLike = { readonly id: string } & Record<string, unknown>;

/** A handler that holds its step until `open()`. */
function gated(): { registration: ReturnType<typeof poisonHandlers>; open: () => void } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  return {
    registration: bindHandlers(
      poison,
      { explode: async () => (await gate, { survivedBy: 'gated' }) },
      shapeHash(poison),
    ),
    open,
  };
}

describeStores('starts claimed for the worker of their process', (getStore) => {
  const workers: Worker[] = [];
  beforeAll(() => migrateForTest(getStore(), [poison]));
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await sql`UPDATE ledgerflow.workflow_run SET status = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, finished_at = now()
               WHERE status NOT IN ('completed', 'failed', 'cancelled')`.execute(getStore().db);
  });

  it('inserts the run already claimed, in one statement, without a NOTIFY; the worker drives it at once (startAndWait: inserted completed)', async () => {
    const { store, statements, notifications } = observed(getStore());
    const log = eventLog();
    const worker = createWorker({
      store,
      workflows: [poisonHandlers('local')],
      concurrency: 2,
      ...NO_POLL,
      onEvent: log.onEvent,
    });
    workers.push(worker);
    await worker.start();
    const client = createClient({ store, worker });
    const before = statements.length;

    const first = await client.startAndWait(poison, { label: 'local-1' }, { wait: { timeoutMs: 10_000 } });
    const { runId: second } = await client.start(poison, { label: 'local-2' });
    await log.waitFor('run-completed', (e) => e.runId === second);

    expect(first.status).toBe('completed');
    for (const id of [first.id, second]) {
      const { run, attempts } = await runState(getStore(), id);
      expect(run).toMatchObject({ status: 'completed', fencing_token: 1 });
      expect(attempts.map((a) => [a.attempt, a.status, a.worker_id])).toEqual([[1, 'succeeded', worker.id]]);
    }
    const during = statements.slice(before);
    // `start` inserts the run claimed; `startAndWait` hands it over uninserted and its one plain step's completion inserts it.
    expect(during.filter(isStartClaim)).toHaveLength(1);
    expect(during.filter(isCompletedInsert)).toHaveLength(1);
    expect(during.filter(isLoopClaim)).toEqual([]);
    expect(notifications).toEqual([]);
    expect(log.errors()).toEqual([]);
  });

  it('with no slot free, the start NOTIFYs; the worker, full, claims nothing until its slot frees, then takes the run', async () => {
    const { store, statements, notifications } = observed(getStore());
    const log = eventLog();
    const { registration, open } = gated();
    const worker = createWorker({ store, workflows: [registration], concurrency: 1, ...NO_POLL, onEvent: log.onEvent });
    workers.push(worker);
    await worker.start();
    const client = createClient({ store, worker });

    const { runId: held } = await client.start(poison, { label: 'held' });
    await log.waitFor('run-claimed', (e) => e.runId === held);
    const before = statements.length;
    const { runId: queued } = await client.start(poison, { label: 'queued' });
    await waitUntil('the NOTIFY of the second start', () => notifications.includes(queued));
    // Give a (wrong) claim on the notification time to show up.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(statements.slice(before).filter((s) => isLoopClaim(s) || isStartClaim(s))).toEqual([]);
    expect((await runState(getStore(), queued)).run).toMatchObject({ status: 'pending', fencing_token: 0 });

    open();
    await log.waitFor('run-completed', (e) => e.runId === queued);
    expect(statements.slice(before).filter(isLoopClaim)).toHaveLength(1);
    expect(log.errors()).toEqual([]);
  });

  it('a start whose worker does not run (or serves another workflow) is a plain start: pending, NOTIFY at commit', async () => {
    const { store, notifications } = observed(getStore());
    const stopped = createWorker({ store, workflows: [poisonHandlers('never')], ...NO_POLL });
    const client = createClient({ store, worker: stopped });
    const listening = createWorker({ store, workflows: [poisonHandlers('listener')], concurrency: 1, ...NO_POLL });
    workers.push(listening);
    const log = eventLog();
    // Only to receive the NOTIFY: a worker that is not the client's.
    const other = createWorker({ store, workflows: [poisonHandlers('other')], ...NO_POLL, onEvent: log.onEvent });
    workers.push(other);
    await other.start();
    const { runId } = await client.start(poison, { label: 'plain' });
    await waitUntil('the NOTIFY of the plain start', () => notifications.includes(runId));
    await log.waitFor('run-completed', (e) => e.runId === runId);
    const { attempts } = await runState(getStore(), runId);
    expect(attempts.map((a) => a.worker_id)).toEqual([other.id]);
  });

  it('a start whose claimed insert fails before it is sent leaves no run and gives its slot back', async () => {
    const { store, statements, failNextStartClaim } = observed(getStore());
    const log = eventLog();
    const worker = createWorker({
      store,
      workflows: [poisonHandlers('local')],
      concurrency: 1,
      ...NO_POLL,
      onEvent: log.onEvent,
    });
    workers.push(worker);
    await worker.start();
    const client = createClient({ store, worker });
    const runId = '00000000-0000-4000-8000-0000000000f1';
    failNextStartClaim('before');
    await expect(client.start(poison, { label: 'failing' }, { runId })).rejects.toThrow(/start claim failed/);
    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE id = ${runId}`.execute(getStore().db);
    expect(rows[0]?.n).toBe(0);

    const before = statements.length;
    const again = await client.startAndWait(poison, { label: 'failing' }, { runId, wait: { timeoutMs: 10_000 } });
    expect(again.status).toBe('completed');
    expect(statements.slice(before).filter(isStartClaim)).toHaveLength(1);
    expect(log.errors()).toEqual([]);
  });

  it('a start whose claimed insert committed but whose answer was lost: the start throws, the worker adopts the run and drives it', async () => {
    const { store, failNextStartClaim } = observed(getStore());
    const log = eventLog();
    const worker = createWorker({
      store,
      workflows: [poisonHandlers('local')],
      concurrency: 1,
      ...NO_POLL,
      onEvent: log.onEvent,
    });
    workers.push(worker);
    await worker.start();
    const client = createClient({ store, worker });
    const runId = '00000000-0000-4000-8000-0000000000f2';
    failNextStartClaim('after');
    await expect(client.start(poison, { label: 'lost' }, { runId })).rejects.toThrow(/start claim failed/);
    await log.waitFor('run-adopted', (e) => e.runId === runId);
    await log.waitFor('run-completed', (e) => e.runId === runId);
    const { run, attempts } = await runState(getStore(), runId);
    expect(run).toMatchObject({ status: 'completed', fencing_token: 1 });
    expect(attempts.map((a) => [a.attempt, a.status, a.worker_id])).toEqual([[1, 'succeeded', worker.id]]);
    // Starting it again finds it (same input): nothing is started twice.
    expect(await client.start(poison, { label: 'lost' }, { runId })).toEqual({ runId, created: false });
  });

  it('a run started claimed is, row for row, what the claim statement makes of the same run started pending', async () => {
    const db = getStore().db;
    const registry = buildRegistry([poisonHandlers('rows')]);
    const lease = { workerId: 'worker-rows', leaseMs: 45_000 };
    const columns = (id: string) => ({
      id,
      workflow_name: poison.name,
      workflow_version: poison.version,
      input: '{"label":"rows"}',
      dedupe_key: null,
      priority: 3,
    });
    const [viaClaim, viaStart] = ['00000000-0000-4000-8000-0000000000a1', '00000000-0000-4000-8000-0000000000a2'];
    // Both inside one transaction that is rolled back: the claim takes only the run just inserted.
    const compared = await db
      .transaction()
      .execute(async (trx) => {
        await sql`UPDATE ledgerflow.workflow_run SET run_after = 'infinity' WHERE status = 'pending'`.execute(trx);
        await insertRunStatement(columns(viaClaim), { guarded: false, notify: false }).execute(trx);
        const claimed = await claimRuns(trx, registry, { ...lease, limit: 1 });
        const started = (
          await insertRunStatement(columns(viaStart), {
            guarded: false,
            notify: false,
            claimedBy: { ...lease, step: poison.steps[0]!.name },
          }).execute(trx)
        ).rows.map(toLeasedRun);
        const rows = async (id: string) => ({
          run: (
            await sql<{
              r: Record<string, unknown>;
            }>`SELECT to_jsonb(r) - 'id' - 'created_at' - 'updated_at' - 'run_after' - 'lease_expires_at' AS r FROM ledgerflow.workflow_run r WHERE id = ${id}`.execute(
              trx,
            )
          ).rows[0]?.r,
          leaseMs: (
            await sql<{
              ms: number;
            }>`SELECT round(extract(epoch FROM lease_expires_at - updated_at) * 1000)::int AS ms FROM ledgerflow.workflow_run WHERE id = ${id}`.execute(
              trx,
            )
          ).rows[0]?.ms,
          attempts: (
            await sql<{
              a: Record<string, unknown>;
            }>`SELECT to_jsonb(a) - 'run_id' - 'started_at' AS a FROM ledgerflow.step_attempt a WHERE run_id = ${id}`.execute(
              trx,
            )
          ).rows.map((r) => r.a),
        });
        const result = { claimed, started, a: await rows(viaClaim), b: await rows(viaStart) };
        throw Object.assign(new Error('rolled back'), { result });
      })
      .catch((error: { result?: unknown }) => {
        if (error.result === undefined) throw error;
        return error.result as { claimed: LeasedRunLike[]; started: LeasedRunLike[]; a: unknown; b: unknown };
      });
    expect(compared.claimed.map((r) => r.id)).toEqual([viaClaim]);
    expect(compared.started.map(({ id, ...rest }) => rest)).toEqual(compared.claimed.map(({ id, ...rest }) => rest));
    expect(compared.b).toEqual(compared.a);
    expect(compared.a).toMatchObject({
      run: { status: 'running', lease_owner: 'worker-rows', fencing_token: 1 },
      leaseMs: 45_000,
      attempts: [{ attempt: 1, status: 'running' }],
    });
  });

  it('a start with a deadline and a dedupe key, claimed locally: the deadline is set, the key finds the run again', async () => {
    const { store, statements } = observed(getStore());
    const worker = createWorker({ store, workflows: [poisonHandlers('deadline')], concurrency: 1, ...NO_POLL });
    workers.push(worker);
    await worker.start();
    const client = createClient({ store, worker });
    const before = statements.length;
    const run = await client.startAndWait(
      poison,
      { label: 'with-deadline' },
      { dedupeKey: 'local-deadline-1', timeoutMs: 60_000, wait: { timeoutMs: 10_000 } },
    );
    expect(run.status).toBe('completed');
    expect(statements.slice(before).filter(isStartClaim)).toHaveLength(1);
    const { rows } = await sql<{ seconds: number }>`
      SELECT round(extract(epoch FROM deadline_at - created_at))::int AS seconds FROM ledgerflow.workflow_run WHERE id = ${run.id}`.execute(
      getStore().db,
    );
    expect(rows[0]?.seconds).toBe(60);
    // The claimed insert is guarded and conflict-free like the plain one: the key names the same run.
    expect(
      await client.start(poison, { label: 'with-deadline' }, { dedupeKey: 'local-deadline-1', timeoutMs: 60_000 }),
    ).toEqual({ runId: run.id, created: false });
  });

  it('refuses a worker created over another store', () => {
    const store = getStore();
    const worker = createWorker({ store: { ...store }, workflows: [poisonHandlers('x')] });
    expect(() => createClient({ store, worker })).toThrow(
      /the worker was created over another store; pass the same store/,
    );
  });

  it('runs started while three workers idle are all picked up promptly, one claim per idle worker and notification', async () => {
    const fleet = [observed(getStore()), observed(getStore()), observed(getStore())];
    const log = eventLog();
    for (const [i, { store }] of fleet.entries()) {
      const worker = createWorker({
        store,
        workflows: [poisonHandlers(`w${i}`)],
        concurrency: 4,
        ...NO_POLL,
        onEvent: log.onEvent,
      });
      workers.push(worker);
      await worker.start();
    }
    const client = createClient({ store: getStore() });
    const before = fleet.map((f) => f.statements.length);
    const started = performance.now();
    const starts = 6;
    for (let i = 0; i < starts; i += 1) {
      const { runId } = await client.start(poison, { label: `idle-${i}` });
      await log.waitFor('run-completed', (e) => e.runId === runId);
    }
    expect(performance.now() - started).toBeLessThan(5_000);
    const claims = fleet.map((f, i) => f.statements.slice(before[i]).filter(isLoopClaim).length);
    // At most one claim per idle worker and notification (the herd that remains for starts without
    // a local worker): before, each run that ended also woke its worker to claim again. (Fewer
    // when a worker's completion commit carried a fused claim that the notification found in flight.)
    expect(claims.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(fleet.length * starts + 2);
    expect(claims.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(starts);
    expect(log.errors()).toEqual([]);
  });
});
