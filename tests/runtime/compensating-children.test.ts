import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { z } from 'zod';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { workflow, type AnyWorkflow } from 'ledgerflow/dsl';
import {
  bindHandlers,
  createClient,
  createWorker,
  NonRetryableError,
  type Worker,
  type WorkerOptions,
} from 'ledgerflow/runtime';
import { shapeHash } from '../../dsl/workflow-shape.js';
import { coreMigrations } from '../../runtime/migrate/core-migrations.js';
import { loadMigrations } from '../../runtime/migrate/migration-source.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest, workflowMigrations } from '../support/migrate-for-test.js';
import type { TestStore } from '../support/test-stores.js';
import { runState, waitUntil } from './fixtures/run-helpers.js';

/*
 * Issue 24, item 1: a child that failed and is compensating is not cancelled when its parent
 * settles — cancelled by an operator, failed (another child failed), past its deadline, or
 * compensated. The cascade of `run_settled` (core 0017) leaves it be: it finishes its
 * compensation and ends `compensated`, its charge refunded exactly once. The refund is held
 * inside its `perform` while the parent settles, so the cascade meets the child mid-compensation.
 * Nor does its own deadline or an operator cancel it, and the database refuses the state. Last, a
 * database the old cascade reached: the run it left `cancelled` mid-compensation is repaired by
 * the migration to `compensation_failed`, and an operator's retry finishes its refund.
 */

const Order = z.object({ orderId: z.string(), failAt: z.enum(['check', 'confirm']) });
const Id = z.object({ id: z.string() });

/** Charges, then fails at `confirm` (the charge is refunded) — or at `check`, before it (nothing to undo). */
const order = workflow('cc-order', { version: 1, input: Order })
  .step('check', { output: z.object({}), retry: { maxAttempts: 1 } })
  .external('charge', {
    output: Id,
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
    compensate: {
      name: 'refund',
      key: ({ input }) => `refund:${input.orderId}`,
      output: Id,
      idempotentByKey: true,
      retry: { maxAttempts: 3, initialDelayMs: 20 },
    },
  })
  .step('confirm', { output: z.object({}), retry: { maxAttempts: 1 } });

const Orders = z.object({ ref: z.string(), orders: z.array(Order) });
const fanOut = {
  items: ({ input }: { input: z.infer<typeof Orders> }) => input.orders,
  workflow: order,
  retry: { maxAttempts: 1 },
} as const;

/** A parent of orders with no compensation of its own: it fails or is cancelled. */
const parent = workflow('cc-parent', { version: 1, input: Orders })
  .forEach('orders', { ...fanOut, key: ({ item }) => `cc:${item.orderId}`, input: ({ item }) => item })
  .step('done', { output: z.object({}) });

/** A parent that reserves first and undoes it: it ends compensated. */
const compensatingParent = workflow('cc-comp-parent', { version: 1, input: Orders })
  .transactional('reserve', {
    output: z.object({ reserved: z.string() }),
    key: ({ input }) => `reserve:${input.ref}`,
    compensate: {
      name: 'unreserve',
      key: ({ input }) => `unreserve:${input.ref}`,
      output: z.object({ released: z.string() }),
    },
  })
  .forEach('orders', { ...fanOut, key: ({ item }) => `ccc:${item.orderId}`, input: ({ item }) => item })
  .step('done', { output: z.object({}) });

/** Applications per key at a provider that does not dedupe: a second refund would count 2. */
const applied = new Map<string, number>();
const apply = (key: string): { id: string } => {
  applied.set(key, (applied.get(key) ?? 0) + 1);
  return { id: `fx:${key}` };
};

/**
 * A handler point held until the test releases it; `reached` resolves once a handler waits there.
 * Released with an error, the handler throws it (once: the next pass goes through).
 */
interface Hold {
  readonly reached: Promise<void>;
  readonly release: (error?: Error) => void;
  readonly pass: () => Promise<void>;
}
const holds = new Map<string, Hold>();
function hold(name: string): Hold {
  let reach!: () => void;
  let release!: () => void;
  let failure: Error | undefined;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  const h: Hold = {
    reached,
    release: (error) => ((failure = error), release()),
    pass: async () => {
      reach();
      await released;
      const thrown = failure;
      failure = undefined;
      if (thrown !== undefined) throw thrown;
    },
  };
  holds.set(name, h);
  return h;
}
const passHold = (name: string): Promise<void> => holds.get(name)?.pass() ?? Promise.resolve();

const orderHandlers = () =>
  bindHandlers(
    order,
    {
      check: async ({ input }) => {
        if (input.failAt !== 'check') return {};
        await passHold(`check:${input.orderId}`);
        throw new NonRetryableError(`order ${input.orderId} fails its check`);
      },
      charge: { perform: async ({ key }) => apply(key) },
      refund: {
        perform: async ({ key }) => {
          await passHold(key);
          return apply(key);
        },
      },
      confirm: ({ input }) => {
        if (input.failAt === 'confirm') throw new NonRetryableError(`order ${input.orderId} cannot be confirmed`);
        return {};
      },
    },
    shapeHash(order),
  );
const parentHandlers = () => bindHandlers(parent, { done: () => ({}) }, shapeHash(parent));
const compensatingParentHandlers = () =>
  bindHandlers(
    compensatingParent,
    {
      reserve: async (ctx) => ctx.record({ reserved: ctx.input.ref }),
      unreserve: async (ctx) => (
        apply(`unreserve:${ctx.input.ref}`), ctx.record({ released: ctx.steps.reserve.reserved })
      ),
      done: () => ({}),
    },
    shapeHash(compensatingParent),
  );

const FAST: Partial<WorkerOptions> = { pollIntervalMs: 20, leaseMs: 5_000, reconcileIntervalMs: 0 };

describeStores('a compensating child outlives its parent', (getStore) => {
  const workers: Worker[] = [];
  const client = () => createClient({ store: getStore() });
  const startWorker = async (): Promise<void> => {
    const w = createWorker({
      store: getStore(),
      ...FAST,
      workflows: [orderHandlers(), parentHandlers(), compensatingParentHandlers()],
    });
    workers.push(w);
    await w.start();
  };
  const childOf = async (parentId: string, orderId: string): Promise<string> => {
    const children = await client().listRuns({ parentRunId: parentId });
    const child = children.find((c) => (c.input as { orderId: string }).orderId === orderId);
    if (child === undefined) throw new Error(`no child for ${orderId} among ${children.length}`);
    return child.id;
  };
  const statusOf = async (runId: string): Promise<string> => (await client().getRun(runId)).status;
  const settled = (runId: string, status: string) =>
    waitUntil(`run ${runId} ${status}`, async () => {
      const now = await statusOf(runId);
      if (['completed', 'failed', 'cancelled', 'compensated', 'compensation_failed'].includes(now) && now !== status) {
        throw new Error(`run ${runId} ended ${now}, not ${status}`);
      }
      return now === status;
    });

  /** The child mid-compensation when its parent settled: still compensating, then compensated with its charge refunded once. */
  const expectChildCompensated = async (childId: string, orderId: string, refund: Hold): Promise<void> => {
    const during = (await runState(getStore(), childId)).run;
    expect(during).toMatchObject({ status: 'running', compensation: 'failure', finished_at: null });
    refund.release();
    await settled(childId, 'compensated');
    const { run, effects } = await runState(getStore(), childId);
    expect(run).toMatchObject({
      status: 'compensated',
      compensation: 'failure',
      error: { message: `order ${orderId} cannot be confirmed` },
    });
    expect(
      effects
        .filter((e) => e.status === 'recorded')
        .map((e) => e.step_name)
        .sort(),
    ).toEqual(['charge', 'refund']);
    expect(applied.get(`charge:${orderId}`)).toBe(1);
    expect(applied.get(`refund:${orderId}`)).toBe(1);
  };

  beforeAll(() => migrateForTest(getStore(), [order, parent, compensatingParent]).then(() => undefined));
  afterEach(async () => {
    for (const h of holds.values()) h.release();
    holds.clear();
    applied.clear();
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 200 })));
  });

  it("an operator's cancel of the parent leaves a compensating child to finish: refunded once, compensated", async () => {
    const refund = hold('refund:a-1');
    const { runId } = await client().start(parent, { ref: 'a', orders: [{ orderId: 'a-1', failAt: 'confirm' }] });
    await startWorker();
    await refund.reached;

    expect(await client().cancel(runId)).toBe(true);
    expect(await statusOf(runId)).toBe('cancelled');
    await expectChildCompensated(await childOf(runId, 'a-1'), 'a-1', refund);
  });

  it('a parent that fails (another child failed) leaves a compensating child to finish', async () => {
    const refund = hold('refund:b-1');
    const check = hold('check:b-2');
    const { runId } = await client().start(parent, {
      ref: 'b',
      orders: [
        { orderId: 'b-1', failAt: 'confirm' },
        { orderId: 'b-2', failAt: 'check' },
      ],
    });
    await startWorker();
    await Promise.all([refund.reached, check.reached]);

    check.release();
    await settled(runId, 'failed');
    await expectChildCompensated(await childOf(runId, 'b-1'), 'b-1', refund);
    // The other child failed before its charge: nothing to undo.
    expect(await statusOf(await childOf(runId, 'b-2'))).toBe('compensated');
    expect(applied.has('charge:b-2')).toBe(false);
  });

  it('a parent past its deadline leaves a compensating child to finish', async () => {
    const refund = hold('refund:c-1');
    const { runId } = await client().start(
      parent,
      { ref: 'c', orders: [{ orderId: 'c-1', failAt: 'confirm' }] },
      { timeoutMs: 3_600_000 },
    );
    await startWorker();
    await refund.reached;

    // Its deadline passes now (waiting for its child, it is due at its deadline).
    await sql`UPDATE ledgerflow.workflow_run SET deadline_at = statement_timestamp(), run_after = statement_timestamp()
               WHERE id = ${runId}`.execute(getStore().db);
    await settled(runId, 'cancelled');
    expect((await client().getRun(runId)).error).toMatchObject({ name: 'DeadlineExceeded' });
    await expectChildCompensated(await childOf(runId, 'c-1'), 'c-1', refund);
  });

  it('a parent cancelled with compensate ends compensated and leaves a compensating child to finish', async () => {
    const refund = hold('refund:d-1');
    const { runId } = await client().start(compensatingParent, {
      ref: 'd',
      orders: [{ orderId: 'd-1', failAt: 'confirm' }],
    });
    await startWorker();
    await refund.reached;

    expect(await client().cancel(runId, { compensate: true })).toBe(true);
    await settled(runId, 'compensated');
    expect(applied.get('unreserve:d')).toBe(1);
    await expectChildCompensated(await childOf(runId, 'd-1'), 'd-1', refund);
  });

  it('a compensating run past its own deadline is not cancelled: it finishes compensating', async () => {
    const refund = hold('refund:f-1');
    const { runId } = await client().start(order, { orderId: 'f-1', failAt: 'confirm' }, { timeoutMs: 3_600_000 });
    await startWorker();
    await refund.reached;

    await sql`UPDATE ledgerflow.workflow_run SET deadline_at = statement_timestamp() WHERE id = ${runId}`.execute(
      getStore().db,
    );
    // The refund fails once: its next attempt is claimed past the deadline, and runs all the same.
    refund.release(new Error('the refund desk timed out'));
    await settled(runId, 'compensated');
    const { run, attempts } = await runState(getStore(), runId);
    expect(run).toMatchObject({ compensation: 'failure', error: { message: 'order f-1 cannot be confirmed' } });
    expect(attempts.filter((a) => a.step_name === 'refund').map((a) => a.status)).toEqual(['failed', 'succeeded']);
    expect(applied.get('refund:f-1')).toBe(1);
  });

  it('an operator cannot cancel a compensating run, and the database refuses a cancelled run that compensates', async () => {
    const refund = hold('refund:e-1');
    const { runId } = await client().start(parent, { ref: 'e', orders: [{ orderId: 'e-1', failAt: 'confirm' }] });
    await startWorker();
    await refund.reached;
    const childId = await childOf(runId, 'e-1');

    expect(await client().cancel(childId)).toBe(false);
    expect(await client().cancel(childId, { compensate: false, actor: 'ops', reason: 'stop it' })).toBe(false);
    expect(await client().listAudit({ runId: childId })).toEqual([]);
    await expect(
      sql`UPDATE ledgerflow.workflow_run SET status = 'cancelled', finished_at = statement_timestamp(), lease_owner = NULL, lease_expires_at = NULL
           WHERE id = ${childId}`.execute(getStore().db),
    ).rejects.toThrow(/workflow_run_cancelled_compensation_check/);

    await expectChildCompensated(childId, 'e-1', refund);
    await settled(runId, 'failed');
  });
});

/** Core migrations before 0017, and the workflows', applied and recorded as `migrate` would have. */
async function migrateBefore0017(store: TestStore, workflows: readonly AnyWorkflow[]): Promise<void> {
  await sql`DROP SCHEMA ledgerflow CASCADE`.execute(store.db);
  await sql`CREATE SCHEMA ledgerflow`.execute(store.db);
  await sql`CREATE TABLE ledgerflow.schema_migration (
    name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`.execute(store.db);
  const before = coreMigrations().filter((m) => m.number < 17);
  const own = loadMigrations([workflowMigrations(workflows)]);
  for (const migration of [...before, ...own]) {
    await store.db.transaction().execute(async (trx) => {
      await sql.raw(migration.sql).execute(trx);
      await trx
        .insertInto('ledgerflow.schema_migration')
        .values({ name: migration.name, checksum: migration.checksum })
        .execute();
    });
  }
}

describeStores('core 0017: upgrading a database the old cascade reached', (getStore) => {
  afterEach(() => applied.clear());

  it('a child it cancelled mid-compensation becomes compensation_failed; a retry finishes its refund, once', async () => {
    const store = getStore();
    await migrateBefore0017(store, [order, parent]);
    // What the old cascade left: the parent cancelled; its child, which had recorded its charge,
    // failed at confirm and was about to refund it, cancelled with `compensation` still set.
    const [parentId, childId] = [randomUUID(), randomUUID()];
    const cancelledBy = { name: 'Cancelled', message: `its parent run ${parentId} cancelled` };
    await sql`INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, status, finished_at, error)
              VALUES (${parentId}, ${parent.name}, ${parent.version}, '{"ref":"u","orders":[{"orderId":"u-1","failAt":"confirm"}]}'::jsonb,
                      'cancelled', now(), '{"name":"Cancelled","message":"the run was cancelled"}'::jsonb)`.execute(
      store.db,
    );
    await sql`INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, status, finished_at, error, compensation,
                                                   current_step, fencing_token, parent_run_id, parent_step, parent_index, dedupe_key)
              VALUES (${childId}, ${order.name}, ${order.version}, '{"orderId":"u-1","failAt":"confirm"}'::jsonb, 'cancelled', now(),
                      ${JSON.stringify(cancelledBy)}::jsonb, 'failure', ${order.steps.length}, 4, ${parentId}, 'orders', 0, 'cc:u-1')`.execute(
      store.db,
    );
    await sql`INSERT INTO ledgerflow.step_effect (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
              VALUES (${childId}, 'charge', 'charge:u-1', '{"id":"fx:charge:u-1"}'::jsonb, 'recorded', 'external', 'h', 1, 1, now())`.execute(
      store.db,
    );
    await sql`INSERT INTO ledgerflow.step_result (run_id, workflow_name, workflow_version, step_name, kind, output, attempt, idempotency_key, effect_status)
              VALUES (${childId}, ${order.name}, ${order.version}, 'check', 'step', '{}'::jsonb, 1, NULL, NULL),
                     (${childId}, ${order.name}, ${order.version}, 'charge', 'external', '{"id":"fx:charge:u-1"}'::jsonb, 1, 'charge:u-1', 'recorded')`.execute(
      store.db,
    );
    applied.set('charge:u-1', 1);

    const { applied: ran } = await migrateForTest(store, [order, parent]);
    expect(ran).toContain('core/0017_compensating_children.sql');
    const { run } = await runState(store, childId);
    expect(run).toMatchObject({
      status: 'compensation_failed',
      compensation: 'failure',
      current_step: order.steps.length,
      error: { name: 'CompensationInterrupted', message: expect.stringContaining(cancelledBy.message) },
    });
    expect(run.finished_at).not.toBeNull();
    expect((await runState(store, parentId)).run.status).toBe('cancelled');

    const client = createClient({ store });
    expect(await client.retryRun(childId, { actor: 'ops', reason: 'finish the refund' })).toMatchObject({
      fromStep: 'refund',
    });
    const w = createWorker({ store, ...FAST, workflows: [orderHandlers(), parentHandlers()] });
    try {
      await w.drain({ timeoutMs: 30_000 });
    } finally {
      await w.stop();
    }
    expect((await runState(store, childId)).run.status).toBe('compensated');
    expect(applied.get('refund:u-1')).toBe(1);
  });
});
