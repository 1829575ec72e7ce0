import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '../../dsl/workflow.js';
import { createClient, type Client } from '../../runtime/client/client.js';
import {
  DuplicateRunError,
  MigrationError,
  RunNotFoundError,
  UnknownWorkflowError,
  ValidationError,
  WaitTimeoutError,
} from '../../runtime/errors.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import type { Store } from '../../runtime/store/store.js';
import { createWorker } from '../../runtime/worker/worker.js';
import { RUNS_CHANNEL } from '../../runtime/store/channels.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { twoStepsHandlers } from './fixtures/test-handlers.js';
import { twoSteps } from './fixtures/test-workflows.js';

const order = workflow('ct-order', {
  version: 1,
  input: z.object({
    orderId: z.string().trim().min(1),
    amountCents: z.number().int().positive(),
    currency: z.enum(['EUR', 'USD']).default('EUR'),
    items: z.array(z.object({ sku: z.string(), qty: z.number().int().positive() })),
  }),
})
  .step('price', { output: z.object({ totalCents: z.number() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
  });

const other = workflow('ct-other', { version: 1, input: z.object({ orderId: z.string() }) }).step('noop', {
  output: z.object({}),
});

/** Same name and version as `other`, different steps: what a forgotten version bump looks like. */
const otherChanged = workflow('ct-other', { version: 1, input: z.object({ orderId: z.string() }) })
  .step('noop', { output: z.object({}) })
  .step('extra', { output: z.object({}) });

const notMigrated = workflow('ct-not-migrated', { version: 1, input: z.object({}) }).step('noop', {
  output: z.object({}),
});

const validOrder = (orderId: string) => ({ orderId, amountCents: 1200, items: [{ sku: 'A', qty: 1 }] });

async function runCount(store: Store, workflowName: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM ledgerflow.workflow_run WHERE workflow_name = ${workflowName}`.execute(store.db);
  return rows[0]!.n;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

describeStores('client', (getStore, kind) => {
  let client: Client;
  beforeAll(async () => {
    await migrateForTest(getStore(), [order, other, twoSteps]);
    await sql`CREATE TABLE public.app_order (id text PRIMARY KEY)`.execute(getStore().db);
    client = createClient({ store: getStore(), workflows: [order, other, twoStepsHandlers()] });
  });

  describe('start', () => {
    it('rejects invalid input with every field path and problem, and writes nothing', async () => {
      const error = await rejection(
        client.start(order, { orderId: '  ', amountCents: '12', items: [{ sku: 'A', qty: 0 }] } as never),
      );
      expect(error).toBeInstanceOf(ValidationError);
      const issues = (error as ValidationError).issues;
      expect(issues).toHaveLength(3);
      expect(issues[0]).toMatch(/^orderId: /);
      expect(issues[1]).toMatch(/^amountCents: .*expected number, received string/);
      expect(issues[2]).toMatch(/^items\[0\]\.qty: /);
      expect(error.message).toMatch(/^Invalid input for workflow "ct-order" v1:\n {2}- orderId: /);
      expect(error.message).toContain('Nothing was written.');
      expect(await runCount(getStore(), 'ct-order')).toBe(0);
    });

    it('rejects a root that is not an object, a bad run id and an empty dedupe key before writing', async () => {
      const root = await rejection(client.start(order, 'nope' as never));
      expect((root as ValidationError).issues[0]).toMatch(/^\(input\): /);
      const badId = await rejection(client.start(order, validOrder('o-bad'), { runId: 'run-1' }));
      expect(badId.message).toContain('The run id "run-1" is not a UUID');
      const emptyKey = await rejection(client.start(order, validOrder('o-bad'), { dedupeKey: '' }));
      expect(emptyKey).toBeInstanceOf(ValidationError);
      expect(await runCount(getStore(), 'ct-order')).toBe(0);
    });

    it('creates a pending run whose input is the parsed output (defaults applied) and wakes listeners once', async () => {
      const store = getStore();
      const notified: string[] = [];
      const unlisten = await store.listen(RUNS_CHANNEL, (payload) => notified.push(payload));
      try {
        const { runId, created } = await client.start(order, { ...validOrder(' o-1 ') });
        expect(created).toBe(true);
        const run = await client.getRun(runId);
        expect(run).toMatchObject({
          id: runId,
          workflow_name: 'ct-order',
          workflow_version: 1,
          status: 'pending',
          input: { orderId: 'o-1', amountCents: 1200, currency: 'EUR', items: [{ sku: 'A', qty: 1 }] },
          dedupe_key: null,
          current_step: 0,
          lease_owner: null,
          finished_at: null,
        });
        expect(run.steps).toEqual([]);
        for (let i = 0; i < 200 && !notified.includes(runId); i++) await new Promise((r) => setTimeout(r, 10));
        expect(notified).toContain(runId);
      } finally {
        await unlisten();
      }
    });

    it('is idempotent by run id', async () => {
      const runId = randomUUID();
      const first = await client.start(order, validOrder('o-2'), { runId });
      // Upper case is the same uuid; key order in the input does not matter either.
      const again = await client.start(
        order,
        { items: [{ qty: 1, sku: 'A' }], amountCents: 1200, orderId: 'o-2' },
        { runId: runId.toUpperCase() },
      );
      expect(first).toEqual({ runId, created: true });
      expect(again).toEqual({ runId, created: false });
      expect((await client.listRuns({ workflow: 'ct-order' })).filter((r) => r.id === runId)).toHaveLength(1);
    });

    it('is idempotent by dedupe key, per workflow', async () => {
      const first = await client.start(order, validOrder('o-3'), { dedupeKey: 'order:o-3' });
      const again = await client.start(order, validOrder('o-3'), { dedupeKey: 'order:o-3' });
      expect(again).toEqual({ runId: first.runId, created: false });
      // The same key under another workflow is another run.
      const otherRun = await client.start(other, { orderId: 'o-3' }, { dedupeKey: 'order:o-3' });
      expect(otherRun.created).toBe(true);
      expect(otherRun.runId).not.toBe(first.runId);
    });

    it('refuses a run id or dedupe key reused with another input or workflow', async () => {
      const runId = randomUUID();
      await client.start(order, validOrder('o-4'), { runId, dedupeKey: 'order:o-4' });

      const otherInput = await rejection(
        client.start(order, { ...validOrder('o-4'), amountCents: 999 }, { dedupeKey: 'order:o-4' }),
      );
      expect(otherInput).toBeInstanceOf(DuplicateRunError);
      expect(otherInput.message).toBe(
        `Run ${runId} of workflow "ct-order" with dedupe key "order:o-4" was started with a different input. ` +
          "A run id or dedupe key names one run: to start another, use a new id or key; to get this run back whatever its input, pass onDifferentInput: 'return-existing'.",
      );

      const otherWorkflow = await rejection(client.start(other, { orderId: 'o-4' }, { runId }));
      expect(otherWorkflow).toBeInstanceOf(DuplicateRunError);
      expect(otherWorkflow.message).toContain(`Run id ${runId} already belongs to a run of workflow "ct-order"`);

      const otherId = await rejection(
        client.start(order, validOrder('o-4'), { runId: randomUUID(), dedupeKey: 'order:o-4' }),
      );
      expect(otherId.message).toContain(`Dedupe key "order:o-4" of workflow "ct-order" already names run ${runId}`);

      const withoutKey = await rejection(client.start(order, validOrder('o-4'), { runId }));
      expect(withoutKey.message).toContain(`Run ${runId} already exists with dedupe key "order:o-4"`);
      expect(
        (await client.listRuns({ workflow: 'ct-order' })).filter(
          (r) => r.input && (r.input as { orderId: string }).orderId === 'o-4',
        ),
      ).toHaveLength(1);
    });

    it("returns the existing run whatever its input with onDifferentInput: 'return-existing', and still refuses another workflow", async () => {
      const runId = randomUUID();
      await client.start(order, validOrder('o-5'), { runId, dedupeKey: 'order:o-5' });
      const returnExisting = { onDifferentInput: 'return-existing' } as const;
      const byKey = await client.start(
        order,
        { ...validOrder('o-5'), amountCents: 999 },
        { dedupeKey: 'order:o-5', ...returnExisting },
      );
      expect(byKey).toEqual({ runId, created: false });
      expect((await client.getRun(runId)).input).toMatchObject({ amountCents: 1200 });
      const keyless = randomUUID();
      await client.start(order, validOrder('o-6'), { runId: keyless });
      const byId = await client.start(
        order,
        { ...validOrder('o-6'), amountCents: 998 },
        { runId: keyless, ...returnExisting },
      );
      expect(byId).toEqual({ runId: keyless, created: false });
      // Only the input may differ: another workflow, or a key and an id naming two runs, are still refused.
      expect(await rejection(client.start(other, { orderId: 'o-5' }, { runId, ...returnExisting }))).toBeInstanceOf(
        DuplicateRunError,
      );
      const otherId = await rejection(
        client.start(order, validOrder('o-5'), { runId: randomUUID(), dedupeKey: 'order:o-5', ...returnExisting }),
      );
      expect(otherId.message).toContain(`Dedupe key "order:o-5" of workflow "ct-order" already names run ${runId}`);
      const bad = await rejection(
        client.start(order, validOrder('o-5'), { dedupeKey: 'order:o-5', onDifferentInput: 'ignore' as 'refuse' }),
      );
      expect(bad).toBeInstanceOf(ValidationError);
      expect(bad.message).toBe("onDifferentInput must be 'refuse' or 'return-existing' (got ignore).");
    });

    it('starts by registered name, and refuses unknown names', async () => {
      const started = await client.start('ct-other', { orderId: 'by-name' });
      expect((await client.getRun(started.runId)).workflow_name).toBe('ct-other');
      const unknown = await rejection(client.start('ct-nope', {}));
      expect(unknown).toBeInstanceOf(UnknownWorkflowError);
      expect(unknown.message).toBe('Unknown workflow "ct-nope". Registered: ct-order, ct-other, wt-two-steps.');
    });

    it('refuses a workflow version that is not migrated, or migrated with other steps, and writes nothing', async () => {
      const unmigrated = await rejection(client.start(notMigrated, {}));
      expect(unmigrated).toBeInstanceOf(UnknownWorkflowError);
      expect(unmigrated.message).toBe(
        'Workflow "ct-not-migrated" v1 is not migrated in this database. Run `ledgerflow codegen` (if the workflow is new) and then `ledgerflow migrate`.',
      );
      expect(await runCount(getStore(), 'ct-not-migrated')).toBe(0);

      const before = await runCount(getStore(), 'ct-other');
      const changed = await rejection(client.start(otherChanged, { orderId: 'x' }));
      expect(changed).toBeInstanceOf(MigrationError);
      expect(changed.message).toContain('its steps changed without a version bump');
      expect(await runCount(getStore(), 'ct-other')).toBe(before);
    });
  });

  describe('startInTransaction', () => {
    it("creates the run in the caller's transaction when it commits", async () => {
      const store = getStore();
      const runId = await store.db.transaction().execute(async (trx) => {
        await sql`INSERT INTO public.app_order (id) VALUES ('tx-commit')`.execute(trx);
        const started = await client.startInTransaction(trx, order, validOrder('tx-commit'), {
          dedupeKey: 'tx-commit',
        });
        if (kind === 'pg') {
          // Invisible to everyone else until the caller commits.
          const outside = await store.db
            .selectFrom('ledgerflow.workflow_run')
            .select('id')
            .where('id', '=', started.runId)
            .execute();
          expect(outside).toEqual([]);
        }
        return started.runId;
      });
      expect((await client.getRun(runId)).dedupe_key).toBe('tx-commit');
    });

    it("leaves no run when the caller's transaction rolls back", async () => {
      const store = getStore();
      const runId = randomUUID();
      const error = await rejection(
        store.db.transaction().execute(async (trx) => {
          await sql`INSERT INTO public.app_order (id) VALUES ('tx-rollback')`.execute(trx);
          await client.startInTransaction(trx, order, validOrder('tx-rollback'), { runId });
          throw new Error('the caller changed its mind');
        }),
      );
      expect(error.message).toBe('the caller changed its mind');
      expect(await rejection(client.getRun(runId))).toBeInstanceOf(RunNotFoundError);
      const { rows } = await sql`SELECT id FROM public.app_order WHERE id = 'tx-rollback'`.execute(store.db);
      expect(rows).toEqual([]);
    });

    it('refuses something that is not a transaction', async () => {
      const error = await rejection(client.startInTransaction(getStore().db as never, order, validOrder('x')));
      expect(error.message).toContain('startInTransaction needs a Kysely transaction');
    });
  });

  describe('reading runs', () => {
    it('returns a run with its step results, attempts and ledger rows', async () => {
      const store = getStore();
      const { runId } = await client.start(order, validOrder('o-read'));
      // What a worker would have committed for the first two steps.
      await store.db.transaction().execute(async (trx) => {
        await trx
          .insertInto('ledgerflow.step_attempt')
          .values([
            {
              run_id: runId,
              step_name: 'price',
              attempt: 1,
              status: 'failed',
              fencing_token: 1,
              worker_id: 'w1',
              error: { message: 'boom' },
              finished_at: new Date(),
            },
            {
              run_id: runId,
              step_name: 'price',
              attempt: 2,
              status: 'succeeded',
              fencing_token: 1,
              worker_id: 'w1',
              finished_at: new Date(),
            },
            {
              run_id: runId,
              step_name: 'charge',
              attempt: 1,
              status: 'succeeded',
              fencing_token: 1,
              worker_id: 'w1',
              finished_at: new Date(),
            },
          ])
          .execute();
        await trx
          .insertInto('ledgerflow.step_result')
          .values({
            run_id: runId,
            workflow_name: 'ct-order',
            workflow_version: 1,
            step_name: 'price',
            kind: 'step',
            output: { totalCents: 1200 },
            attempt: 2,
          })
          .execute();
        await trx
          .insertInto('ledgerflow.step_effect')
          .values({
            workflow_id: runId,
            step_name: 'charge',
            idempotency_key: 'charge:o-read',
            effect: { chargeId: 'ch_1' },
            status: 'recorded',
            kind: 'external',
            request_hash: 'h',
            attempt: 1,
            fencing_token: 1,
            recorded_at: new Date(),
          })
          .execute();
        await trx
          .insertInto('ledgerflow.step_result')
          .values({
            run_id: runId,
            workflow_name: 'ct-order',
            workflow_version: 1,
            step_name: 'charge',
            kind: 'external',
            output: { chargeId: 'ch_1' },
            attempt: 1,
            idempotency_key: 'charge:o-read',
            effect_status: 'recorded',
          })
          .execute();
      });
      const run = await client.getRun(runId);
      expect(run.steps.map((s) => [s.step_name, s.output])).toEqual(
        expect.arrayContaining([
          ['price', { totalCents: 1200 }],
          ['charge', { chargeId: 'ch_1' }],
        ]),
      );
      expect(run.attempts.map((a) => [a.step_name, a.attempt, a.status])).toEqual(
        expect.arrayContaining([
          ['price', 1, 'failed'],
          ['price', 2, 'succeeded'],
          ['charge', 1, 'succeeded'],
        ]),
      );
      expect(run.attempts.find((a) => a.status === 'failed')?.error).toEqual({ message: 'boom' });
      expect(run.effects).toHaveLength(1);
      expect(run.effects[0]).toMatchObject({ idempotency_key: 'charge:o-read', status: 'recorded', fencing_token: 1 });
      expect(run.effects[0]!.recorded_at).toBeInstanceOf(Date);

      expect((await client.listEffects({ runId })).map((e) => e.idempotency_key)).toEqual(['charge:o-read']);
      expect(await client.listEffects({ runId, pending: true })).toEqual([]);
    });

    it('lists open intents as pending effects', async () => {
      const store = getStore();
      const { runId } = await client.start(order, validOrder('o-intent'));
      await store.db
        .insertInto('ledgerflow.step_effect')
        .values({
          workflow_id: runId,
          step_name: 'charge',
          idempotency_key: 'charge:o-intent',
          effect: {},
          status: 'intent',
          kind: 'external',
          request_hash: 'h',
          attempt: 1,
          fencing_token: 1,
          reconcile_after: new Date(),
        })
        .execute();
      const pending = await client.listEffects({ pending: true });
      expect(pending.map((e) => e.idempotency_key)).toContain('charge:o-intent');
      expect(pending.every((e) => e.status === 'intent')).toBe(true);
    });

    it('lists runs by status and workflow, newest first, and rejects an unknown status', async () => {
      const pending = await client.listRuns({ status: 'pending', workflow: 'ct-order', limit: 3 });
      expect(pending.length).toBe(3);
      expect(pending.every((r) => r.status === 'pending' && r.workflow_name === 'ct-order')).toBe(true);
      const times = pending.map((r) => r.created_at.getTime());
      expect([...times].sort((a, b) => b - a)).toEqual(times);
      const error = await rejection(client.listRuns({ status: 'done' as never }));
      expect(error.message).toBe(
        'Unknown run status "done". Use one of: pending, running, waiting, completed, failed, cancelled, needs_reconciliation, compensated, compensation_failed.',
      );
    });

    it('reports unknown and malformed run ids clearly', async () => {
      const missing = randomUUID();
      const notFound = await rejection(client.getRun(missing));
      expect(notFound).toBeInstanceOf(RunNotFoundError);
      expect(notFound.message).toBe(`No run with id ${missing} in this database.`);
      expect(await rejection(client.getRun('42'))).toBeInstanceOf(ValidationError);
      expect(await rejection(client.cancel(missing))).toBeInstanceOf(RunNotFoundError);
    });
  });

  describe('waitForRun and cancel', () => {
    it('waits until a worker completes the run and returns it with its records', async () => {
      const { runId } = await client.start(twoSteps, { n: 4 });
      const worker = createWorker({
        store: getStore(),
        workflows: [twoStepsHandlers()],
        pollIntervalMs: 20,
        reconcileIntervalMs: 0,
      });
      await worker.start();
      try {
        const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 30_000, pollMs: 20 })).id);
        expect(run.status).toBe('completed');
        expect(run.steps.map((s) => s.step_name)).toEqual(['double', 'describe']);
        expect(run.attempts.every((a) => a.status === 'succeeded')).toBe(true);
      } finally {
        await worker.stop();
      }
    });

    it('times out on a run nobody works on, leaving it as it was', async () => {
      const { runId } = await client.start(other, { orderId: 'wait' });
      const error = await rejection(client.waitForRun(runId, { timeoutMs: 50, pollMs: 10 }));
      expect(error).toBeInstanceOf(WaitTimeoutError);
      expect(error.message).toBe(`Run ${runId} is still pending after 50 ms; it goes on, wait again or inspect it.`);
      expect((await client.getRun(runId)).status).toBe('pending');
    });

    it('cancels a pending run once', async () => {
      const { runId } = await client.start(other, { orderId: 'cancel-pending' });
      expect(await client.cancel(runId)).toBe(true);
      const run = await client.getRun(runId);
      expect(run.status).toBe('cancelled');
      expect(run.finished_at).toBeInstanceOf(Date);
      expect(await client.cancel(runId)).toBe(false);
      expect((await client.waitForRun(runId, { timeoutMs: 1_000 })).status).toBe('cancelled');
    });

    it('cancels a leased run: clears the lease, moves the fencing token on and abandons the running attempt', async () => {
      const store = getStore();
      const { runId } = await client.start(other, { orderId: 'cancel-running' });
      await store.db
        .updateTable('ledgerflow.workflow_run')
        .set({
          status: 'running',
          lease_owner: 'w1',
          lease_expires_at: sql<Date>`now() + interval '1 minute'`,
          fencing_token: 7,
        })
        .where('id', '=', runId)
        .execute();
      await store.db
        .insertInto('ledgerflow.step_attempt')
        .values({ run_id: runId, step_name: 'noop', attempt: 1, status: 'running', fencing_token: 7, worker_id: 'w1' })
        .execute();
      expect(await client.cancel(runId)).toBe(true);
      const run = await client.getRun(runId);
      expect(run).toMatchObject({ status: 'cancelled', lease_owner: null, lease_expires_at: null, fencing_token: 8 });
      expect(run.attempts.map((a) => a.status)).toEqual(['abandoned']);
    });
  });
});

describe('client on PostgreSQL with concurrent starts [pg]', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, [order]);
  });
  afterAll(async () => {
    await store?.close();
  });

  it('creates exactly one run when many processes start the same dedupe key at once', async () => {
    const pools = Array.from({ length: 4 }, () => createPgStore({ connectionString: store.url!, maxConnections: 3 }));
    try {
      const results = await Promise.all(
        pools.flatMap((pool) => {
          const c = createClient({ store: pool });
          return [1, 2, 3].map(() => c.start(order, validOrder('race'), { dedupeKey: 'race' }));
        }),
      );
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(new Set(results.map((r) => r.runId)).size).toBe(1);
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
    expect(await runCount(store, 'ct-order')).toBe(1);
  });
});
