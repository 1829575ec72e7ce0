import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash } from '../../dsl/workflow-shape.js';
import { workflow } from '../../dsl/workflow.js';
import { createClient, type Client } from '../../runtime/client/client.js';
import type { StartOptions } from '../../runtime/client/start-run.js';
import { bindHandlers } from '../../runtime/contracts/registration.js';
import { ValidationError } from '../../runtime/errors.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import type { Store } from '../../runtime/store/store.js';
import { claimRuns } from '../../runtime/worker/claim.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { RUNS_CHANNEL } from '../../runtime/store/channels.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { greet } from './cli-fixtures/workflows.js';
import { waitUntil } from './fixtures/run-helpers.js';
import { runCli as run } from '../support/run-cli.js';

const input = z.object({ customerId: z.string().min(1), note: z.string() });
const digest = workflow('db-digest', { version: 1, input }).step('send', { output: z.object({ sent: z.string() }) });
/** The same input, one more step: a deploy in the middle of a window. */
const digestV2 = workflow('db-digest', { version: 2, input })
  .step('send', { output: z.object({ sent: z.string() }) })
  .step('log', { output: z.object({}) });
const registry = buildRegistry([
  bindHandlers(digest, { send: ({ input: i }) => ({ sent: i.note }) }, shapeHash(digest)),
  bindHandlers(digestV2, { send: ({ input: i }) => ({ sent: i.note }), log: () => ({}) }, shapeHash(digestV2)),
]);

interface DebouncedRun {
  readonly id: string;
  readonly status: string;
  readonly workflow_version: number;
  readonly input: { customerId: string; note: string };
  readonly debounce_key: string | null;
  readonly debounce_open: boolean;
  readonly fencing_token: number;
  /** run_after − created_at (the window from its first start), in ms. */
  readonly window_ms: number;
  /** run_after − updated_at (the window from the last write), in ms. */
  readonly after_update_ms: number;
  /** deadline_at − run_after, in ms; null without a deadline. */
  readonly deadline_after_due_ms: number | null;
  readonly due: boolean;
}

/** The runs of a debounce key, oldest first, with their windows measured on database time. */
async function runsOf(store: Store, key: string): Promise<DebouncedRun[]> {
  const { rows } = await sql<DebouncedRun>`
    SELECT id, status, workflow_version, input, debounce_key, debounce_open, fencing_token::int AS fencing_token,
           round(extract(epoch FROM run_after - created_at) * 1000)::int AS window_ms,
           round(extract(epoch FROM run_after - updated_at) * 1000)::int AS after_update_ms,
           round(extract(epoch FROM deadline_at - run_after) * 1000)::int AS deadline_after_due_ms,
           run_after <= statement_timestamp() AS due
      FROM ledgerflow.workflow_run
     WHERE workflow_name = 'db-digest' AND debounce_key = ${key}
     ORDER BY created_at, id`.execute(store.db);
  return rows;
}

const note = (customerId: string, text: string) => ({ customerId, note: text });
const first = (key: string, windowMs = 60_000): StartOptions => ({ debounce: { key, windowMs, keep: 'first' } });
const last = (key: string, windowMs = 60_000, maxWaitMs?: number): StartOptions => ({
  debounce: { key, windowMs, keep: 'last', ...(maxWaitMs !== undefined ? { maxWaitMs } : {}) },
});

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

/** Waits until the key's newest run is due on database time (its window is over). */
async function windowOver(store: Store, key: string): Promise<void> {
  await waitUntil(
    `the debounce window of ${key} to end`,
    async () => (await runsOf(store, key)).at(-1)?.due === true,
    5_000,
  );
}

describeStores('start with debounce', (getStore) => {
  let client: Client;
  beforeAll(async () => {
    await migrateForTest(getStore(), [digest, digestV2]);
    client = createClient({ store: getStore() });
  });

  describe('validation, before anything is written', () => {
    it('refuses bad debounce options, naming each problem', async () => {
      const error = await rejection(
        client.start(digest, note('c-0', 'x'), { debounce: { key: '', windowMs: 0, keep: 'both' as 'last' } }),
      );
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).issues).toEqual([
        'debounce.key: must be 1 to 1000 characters long (got 0)',
        'debounce.windowMs: must be a number of milliseconds > 0 (got 0)',
        "debounce.keep: must be 'first' or 'last' (got \"both\")",
      ]);
      expect(error.message).toMatch(/^Invalid debounce options:\n {2}- debounce\.key: /);
      expect(error.message).toMatch(/\nNothing was written\.$/);

      const maxWait = await rejection(
        client.start(digest, note('c-0', 'x'), {
          debounce: { key: 'k', windowMs: 1_000, keep: 'first', maxWaitMs: 5_000 },
        }),
      );
      expect((maxWait as ValidationError).issues).toEqual([
        "debounce.maxWaitMs: only for keep 'last' (with keep 'first' the window never moves); remove it",
      ]);
      const shortMaxWait = await rejection(client.start(digest, note('c-0', 'x'), last('k', 1_000, 500)));
      expect((shortMaxWait as ValidationError).issues).toEqual([
        'debounce.maxWaitMs: must be at least windowMs (1000); got 500',
      ]);
      expect(await runsOf(getStore(), 'k')).toEqual([]);
    });

    it('refuses debounce together with a dedupe key or a run id', async () => {
      const withDedupe = await rejection(client.start(digest, note('c-0', 'x'), { ...last('k'), dedupeKey: 'k' }));
      expect((withDedupe as ValidationError).issues).toEqual([
        'debounce with dedupeKey: a dedupe key names one run forever, a debounce key one run per window; pass one of them',
      ]);
      const withRunId = await rejection(
        client.start(digest, note('c-0', 'x'), { ...first('k'), runId: '0b6c3f9e-4a4d-4e39-9f55-2a1d0c8e7b21' }),
      );
      expect((withRunId as ValidationError).issues).toEqual([
        'debounce with runId: a debounced start may join a run that already has its id; drop runId and use the returned runId',
      ]);
      expect(await runsOf(getStore(), 'k')).toEqual([]);
    });

    it('validates the input of a later start before it touches the window, and leaves the run as it was', async () => {
      const opened = await client.start(digest, note('c-1', 'first'), last('valid'));
      const error = await rejection(client.start(digest, { customerId: '', note: 'second' }, last('valid')));
      expect(error).toBeInstanceOf(ValidationError);
      const [run] = await runsOf(getStore(), 'valid');
      expect(run).toMatchObject({ id: opened.runId, input: note('c-1', 'first'), window_ms: 60_000 });
    });
  });

  describe("keep 'first'", () => {
    it('creates a run due at the end of the window; later starts in the window return it unchanged', async () => {
      const opened = await client.start(digest, note('c-2', 'one'), first('first:c-2'));
      expect(opened.created).toBe(true);
      const again = await client.start(digest, note('c-2', 'two'), first('first:c-2'));
      const third = await client.start(digest, note('c-2', 'three'), first('first:c-2'));
      expect([again, third]).toEqual([
        { runId: opened.runId, created: false },
        { runId: opened.runId, created: false },
      ]);
      expect(await runsOf(getStore(), 'first:c-2')).toEqual([
        expect.objectContaining({
          id: opened.runId,
          status: 'pending',
          input: note('c-2', 'one'),
          debounce_key: 'first:c-2',
          debounce_open: true,
          fencing_token: 0,
          window_ms: 60_000,
          due: false,
        }),
      ]);
    });

    it('is per workflow and key: another key opens its own window', async () => {
      const a = await client.start(digest, note('c-3', 'a'), first('first:c-3'));
      const b = await client.start(digest, note('c-4', 'b'), first('first:c-4'));
      expect(a.created && b.created).toBe(true);
      expect(a.runId).not.toBe(b.runId);
    });
  });

  describe("keep 'last'", () => {
    it('gives the run each later input and moves the end of the window to windowMs after that start', async () => {
      const opened = await client.start(digest, note('c-5', 'one'), last('last:c-5'));
      const [before] = await runsOf(getStore(), 'last:c-5');
      await new Promise((resolve) => setTimeout(resolve, 20));
      const again = await client.start(digest, note('c-5', 'two'), last('last:c-5'));
      expect(again).toEqual({ runId: opened.runId, created: false });
      const [after] = await runsOf(getStore(), 'last:c-5');
      expect(after).toMatchObject({
        id: opened.runId,
        status: 'pending',
        input: note('c-5', 'two'),
        debounce_open: true,
        after_update_ms: 60_000,
      });
      // Trailing: the window now ends 60 s after the second start, later than it did.
      expect(after!.window_ms).toBeGreaterThan(before!.window_ms);
    });

    it('never moves the end of the window past maxWaitMs after the first start (maxWaitMs = windowMs: a fixed window)', async () => {
      await client.start(digest, note('c-6', 'one'), last('fixed:c-6', 60_000, 60_000));
      await new Promise((resolve) => setTimeout(resolve, 20));
      await client.start(digest, note('c-6', 'two'), last('fixed:c-6', 60_000, 60_000));
      expect(await runsOf(getStore(), 'fixed:c-6')).toEqual([
        expect.objectContaining({ input: note('c-6', 'two'), window_ms: 60_000 }),
      ]);

      await client.start(digest, note('c-7', 'one'), last('bounded:c-7', 60_000, 60_010));
      await new Promise((resolve) => setTimeout(resolve, 50));
      await client.start(digest, note('c-7', 'two'), last('bounded:c-7', 60_000, 60_010));
      expect(await runsOf(getStore(), 'bounded:c-7')).toEqual([
        expect.objectContaining({ input: note('c-7', 'two'), window_ms: 60_010 }),
      ]);
    });

    it('takes the version, deadline and priority of the start that wins too; the deadline counts from the end of the window', async () => {
      const opened = await client.start(digest, note('c-8', 'one'), {
        ...last('deploy:c-8'),
        timeoutMs: 5_000,
        priority: 3,
      });
      expect((await runsOf(getStore(), 'deploy:c-8'))[0]).toMatchObject({
        workflow_version: 1,
        deadline_after_due_ms: 5_000,
      });
      const again = await client.start(digestV2, note('c-8', 'two'), { ...last('deploy:c-8'), priority: 7 });
      expect(again).toEqual({ runId: opened.runId, created: false });
      expect((await runsOf(getStore(), 'deploy:c-8'))[0]).toMatchObject({
        workflow_version: 2,
        input: note('c-8', 'two'),
        deadline_after_due_ms: null,
      });
      const run = await client.getRun(opened.runId);
      expect(run.priority).toBe(7);
    });

    it("joins a window a keep 'first' start opened, and each start applies its own keep", async () => {
      const opened = await client.start(digest, note('c-9', 'one'), first('mixed:c-9'));
      await client.start(digest, note('c-9', 'two'), last('mixed:c-9'));
      await client.start(digest, note('c-9', 'three'), first('mixed:c-9'));
      expect(await runsOf(getStore(), 'mixed:c-9')).toEqual([
        expect.objectContaining({ id: opened.runId, input: note('c-9', 'two') }),
      ]);
    });
  });

  describe('after the window', () => {
    it('once the window is over, the next start opens a new window; the old run stays pending for a worker', async () => {
      const opened = await client.start(digest, note('c-10', 'one'), last('over:c-10', 150));
      await windowOver(getStore(), 'over:c-10');
      const next = await client.start(digest, note('c-10', 'two'), last('over:c-10', 150));
      expect(next.created).toBe(true);
      const joined = await client.start(digest, note('c-10', 'three'), last('over:c-10', 150));
      expect(joined).toEqual({ runId: next.runId, created: false });
      expect(await runsOf(getStore(), 'over:c-10')).toEqual([
        expect.objectContaining({
          id: opened.runId,
          status: 'pending',
          input: note('c-10', 'one'),
          debounce_open: false,
          due: true,
        }),
        expect.objectContaining({
          id: next.runId,
          status: 'pending',
          input: note('c-10', 'three'),
          debounce_open: true,
        }),
      ]);
    });

    it('once a worker claimed the run, the next start creates a new run and the claimed run is not changed', async () => {
      const opened = await client.start(digest, note('c-11', 'one'), last('claimed:c-11', 150));
      await windowOver(getStore(), 'claimed:c-11');
      const claimed = await claimRuns(getStore().db, registry, {
        workerId: 'debounce-test',
        leaseMs: 30_000,
        limit: 100,
      });
      expect(claimed.map((r) => r.id)).toContain(opened.runId);
      const next = await client.start(digest, note('c-11', 'two'), last('claimed:c-11', 150));
      expect(next.created).toBe(true);
      expect(await runsOf(getStore(), 'claimed:c-11')).toEqual([
        expect.objectContaining({ id: opened.runId, status: 'running', input: note('c-11', 'one'), fencing_token: 1 }),
        expect.objectContaining({ id: next.runId, status: 'pending', input: note('c-11', 'two') }),
      ]);
    });

    it('a run that was claimed and went back to pending (a retry) is never joined', async () => {
      const opened = await client.start(digest, note('c-12', 'one'), first('retried:c-12', 150));
      await windowOver(getStore(), 'retried:c-12');
      await claimRuns(getStore().db, registry, { workerId: 'debounce-test', leaseMs: 30_000, limit: 100 });
      // As a retryable failure leaves it: pending again, due later, fencing token moved on.
      await sql`UPDATE ledgerflow.workflow_run
                   SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = statement_timestamp() + interval '1 hour'
                 WHERE id = ${opened.runId}`.execute(getStore().db);
      const next = await client.start(digest, note('c-12', 'two'), last('retried:c-12'));
      expect(next.created).toBe(true);
      expect((await runsOf(getStore(), 'retried:c-12')).map((r) => [r.id, r.input.note])).toEqual([
        [opened.runId, 'one'],
        [next.runId, 'two'],
      ]);
    });

    it('a cancelled run has no window', async () => {
      const opened = await client.start(digest, note('c-13', 'one'), first('cancelled:c-13'));
      expect(await client.cancel(opened.runId)).toBe(true);
      const next = await client.start(digest, note('c-13', 'two'), first('cancelled:c-13'));
      expect(next.created).toBe(true);
      expect(next.runId).not.toBe(opened.runId);
    });
  });

  it('wakes no worker for a run that is not due (no NOTIFY), but does for a plain start', async () => {
    const store = getStore();
    const notified: string[] = [];
    const unlisten = await store.listen(RUNS_CHANNEL, (payload) => notified.push(payload));
    try {
      await client.start(digest, note('c-14', 'debounced'), first('notify:c-14'));
      const plain = await client.start(digest, note('c-14', 'plain'));
      await waitUntil('the plain start to be notified', () => notified.includes(plain.runId));
      expect(notified).toEqual([plain.runId]);
    } finally {
      await unlisten();
    }
  });

  it("in the caller's transaction: the window exists if and only if the transaction commits", async () => {
    const store = getStore();
    await store.db
      .transaction()
      .execute(async (trx) => {
        await client.startInTransaction(trx, digest, note('c-15', 'rolled back'), last('tx:c-15'));
        throw new Error('rollback');
      })
      .catch((error: Error) => expect(error.message).toBe('rollback'));
    expect(await runsOf(store, 'tx:c-15')).toEqual([]);
    const opened = await store.db
      .transaction()
      .execute((trx) => client.startInTransaction(trx, digest, note('c-15', 'one'), last('tx:c-15')));
    const joined = await store.db
      .transaction()
      .execute((trx) => client.startInTransaction(trx, digest, note('c-15', 'two'), last('tx:c-15')));
    expect(opened.created).toBe(true);
    expect(joined).toEqual({ runId: opened.runId, created: false });
    expect((await runsOf(store, 'tx:c-15')).map((r) => r.input.note)).toEqual(['two']);
  });

  it('many concurrent starts with one key make one run, with one of their inputs', async () => {
    const notes = Array.from({ length: 20 }, (_, i) => `n${i}`);
    const results = await Promise.all(notes.map((n) => client.start(digest, note('c-16', n), last('concurrent:c-16'))));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.runId)).size).toBe(1);
    const runs = await runsOf(getStore(), 'concurrent:c-16');
    expect(runs).toHaveLength(1);
    expect(notes).toContain(runs[0]!.input.note);
  });
});

describe('start with debounce on PostgreSQL, several connections [pg]', () => {
  let store: TestStore;
  let client: Client;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [digest]);
    client = createClient({ store });
  });
  afterAll(async () => {
    await store?.close();
  });

  it('many processes starting one key at once make one pending run per window', async () => {
    const pools = Array.from({ length: 4 }, () => createPgStore({ connectionString: store.url!, maxConnections: 3 }));
    try {
      for (const keep of ['first', 'last'] as const) {
        const key = `race:${keep}`;
        const results = await Promise.all(
          pools.flatMap((pool, p) => {
            const c = createClient({ store: pool });
            return Array.from({ length: 6 }, (_, i) =>
              c.start(digest, note('race', `${p}.${i}`), { debounce: { key, windowMs: 60_000, keep } }),
            );
          }),
        );
        expect(
          results.filter((r) => r.created),
          keep,
        ).toHaveLength(1);
        expect(new Set(results.map((r) => r.runId)).size, keep).toBe(1);
        expect(await runsOf(store, key), keep).toHaveLength(1);
      }
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
  });

  it("a start waits for a concurrent start's uncommitted window, then joins it (or opens its own if that rolled back)", async () => {
    const other = createPgStore({ connectionString: store.url!, maxConnections: 2 });
    try {
      const otherClient = createClient({ store: other });
      for (const outcome of ['commit', 'rollback'] as const) {
        const key = `pending-window:${outcome}`;
        let release!: () => void;
        const released = new Promise<void>((resolve) => (release = resolve));
        let opened: { runId: string } | undefined;
        const holder = store.db
          .transaction()
          .execute(async (trx) => {
            opened = await client.startInTransaction(trx, digest, note('w', 'holder'), last(key));
            await released;
            if (outcome === 'rollback') throw new Error('rollback');
          })
          .catch((error: Error) => expect(error.message).toBe('rollback'));
        await waitUntil('the holder to open its window', () => opened !== undefined);
        let settled = false;
        const waiter = otherClient.start(digest, note('w', 'waiter'), last(key)).finally(() => (settled = true));
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(settled, 'the second start waits for the first one to commit').toBe(false);
        release();
        await holder;
        const started = await waiter;
        if (outcome === 'commit') {
          expect(started).toEqual({ runId: opened!.runId, created: false });
        } else {
          expect(started.created).toBe(true);
        }
        expect((await runsOf(store, key)).map((r) => r.input.note)).toEqual(['waiter']);
      }
    } finally {
      await other.close();
    }
  });

  it('a replace that waits for the row while a worker claims it changes nothing, and opens a new window', async () => {
    const opened = await client.start(digest, note('r', 'one'), last('claim-race'));
    const claimer = createPgStore({ connectionString: store.url!, maxConnections: 1 });
    try {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let locked = false;
      // What a claim writes (status, lease, fencing token), held uncommitted while the start runs.
      const claim = claimer.db.transaction().execute(async (trx) => {
        await sql`UPDATE ledgerflow.workflow_run
                     SET status = 'running', lease_owner = 'claimer', lease_expires_at = statement_timestamp() + interval '30 seconds',
                         fencing_token = fencing_token + 1
                   WHERE id = ${opened.runId}`.execute(trx);
        locked = true;
        await released;
      });
      await waitUntil('the claim to hold the row', () => locked);
      let settled = false;
      const replace = client.start(digest, note('r', 'two'), last('claim-race')).finally(() => (settled = true));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(settled, 'the replace waits for the row lock').toBe(false);
      release();
      await claim;
      const started = await replace;
      expect(started.created).toBe(true);
      expect((await runsOf(store, 'claim-race')).map((r) => [r.id, r.status, r.input.note])).toEqual([
        [opened.runId, 'running', 'one'],
        [started.runId, 'pending', 'two'],
      ]);
    } finally {
      await claimer.close();
    }
  });
});

describe('ledgerflow start --debounce-* [pg]', () => {
  let store: TestStore;
  let db: string[];
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [greet]);
    db = ['--database-url', store.url!, '--workflows', 'tests/runtime/cli-fixtures/workflows.ts'];
  });
  afterAll(async () => {
    await store?.close();
  });

  const TIME = '\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ';

  it('opens a window, joins it, and says which input the run gets', async () => {
    const debounce = ['--debounce-key', 'greet:ann', '--debounce-ms', '60000', '--debounce-keep', 'last'];
    const opened = await run(['start', 'cli-greet', '--input', '{"name":"ann"}', ...debounce, ...db]);
    expect(opened.stderr).toBe('');
    const runId = new RegExp(
      `^Started run ([0-9a-f-]{36}) \\(cli-greet v1\\), due at ${TIME} when its debounce window ends\\.\\n$`,
    ).exec(opened.stdout)?.[1];
    expect(runId, opened.stdout).toBeDefined();

    const joined = await run(['start', 'cli-greet', '--input', '{"name":"ann","slowMs":5}', ...debounce, ...db]);
    expect(joined.stdout).toMatch(
      new RegExp(
        `^Joined the open debounce window of key "greet:ann": run ${runId}, due at ${TIME}; its input is now this one\\.\\n$`,
      ),
    );
    const json = await run([
      'start',
      'cli-greet',
      '--input',
      '{"name":"ann"}',
      ...debounce.slice(0, 4),
      '--debounce-keep',
      'first',
      '--json',
      ...db,
    ]);
    expect(JSON.parse(json.stdout)).toMatchObject({
      runId,
      created: false,
      status: 'pending',
      debounceKey: 'greet:ann',
      runAfter: expect.any(String),
    });
    expect((await run(['run', runId!, '--database-url', store.url!])).stdout).toMatch(/^debounce key +greet:ann$/m);
  });

  it('refuses incomplete debounce options (exit 2) and debounce with --dedupe-key (exit 1), writing nothing', async () => {
    const noWindow = await run([
      'start',
      'cli-greet',
      '--input',
      '{"name":"bob"}',
      '--debounce-key',
      'greet:bob',
      ...db,
    ]);
    expect(noWindow).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--debounce-key needs --debounce-ms <ms> and --debounce-keep last|first.'),
    });
    const noKey = await run(['start', 'cli-greet', '--input', '{"name":"bob"}', '--debounce-ms', '100', ...db]);
    expect(noKey).toMatchObject({ code: 2, stderr: expect.stringContaining('need --debounce-key <key>') });
    const badKeep = await run([
      'start',
      'cli-greet',
      '--input',
      '{"name":"bob"}',
      '--debounce-key',
      'k',
      '--debounce-ms',
      '100',
      '--debounce-keep',
      'both',
      ...db,
    ]);
    expect(badKeep).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--debounce-keep must be one of last, first (got "both").'),
    });
    const withDedupe = await run([
      'start',
      'cli-greet',
      '--input',
      '{"name":"bob"}',
      '--debounce-key',
      'k',
      '--debounce-ms',
      '100',
      '--debounce-keep',
      'last',
      '--dedupe-key',
      'k',
      ...db,
    ]);
    expect(withDedupe.code).toBe(1);
    expect(withDedupe.stderr).toContain('debounce with dedupeKey: a dedupe key names one run forever');
    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE input->>'name' = 'bob'`.execute(store.db);
    expect(rows[0]!.n).toBe(0);
  });

  it('--on-different-input return-existing returns the run a dedupe key names whatever its input', async () => {
    const opened = await run([
      'start',
      'cli-greet',
      '--input',
      '{"name":"cy"}',
      '--dedupe-key',
      'greet:cy',
      '--json',
      ...db,
    ]);
    const { runId } = JSON.parse(opened.stdout) as { runId: string };
    const refused = await run(['start', 'cli-greet', '--input', '{"name":"cyd"}', '--dedupe-key', 'greet:cy', ...db]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("pass onDifferentInput: 'return-existing'");
    const returned = await run([
      'start',
      'cli-greet',
      '--input',
      '{"name":"cyd"}',
      '--dedupe-key',
      'greet:cy',
      '--on-different-input',
      'return-existing',
      ...db,
    ]);
    expect(returned).toMatchObject({ code: 0, stdout: `Run ${runId} already exists (pending); not started again.\n` });
    const bad = await run([
      'start',
      'cli-greet',
      '--input',
      '{"name":"cy"}',
      '--dedupe-key',
      'greet:cy',
      '--on-different-input',
      'ignore',
      ...db,
    ]);
    expect(bad.code).toBe(2);
  });
});
