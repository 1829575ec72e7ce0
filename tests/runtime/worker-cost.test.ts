import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, createWorker, type Store, type WorkerEvent } from 'ledgerflow/runtime';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { requestHash } from '../../runtime/worker/request-hash.js';
import { commitsIn, countingStore } from '../support/counting-store.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { startTestRun, runState, setupAppSchema } from './fixtures/run-helpers.js';
import type { AppDatabase } from './fixtures/test-workflows.js';

/**
 * What one step of each kind costs the database: round trips (every statement the driver
 * sends, BEGIN and COMMIT included) and commits, counted at the driver while a single worker
 * drives a single run, so every statement in the window belongs to that run.
 */
const costed = workflow('wt-cost', { version: 1, input: z.object({ orderId: z.string() }) })
  .step('compute', { output: z.object({ amountCents: z.number() }) })
  .transactional('write', { output: z.object({ rowId: z.number() }), key: ({ input }) => `write:${input.orderId}` })
  .external('call', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `call:${input.orderId}`,
    idempotentByKey: true,
  })
  .step('finish', { output: z.object({ done: z.boolean() }) })
  // Its handler sends nothing through ctx.tx: the transaction is never opened.
  .transactional('note', { output: z.object({ noted: z.boolean() }), key: ({ input }) => `note:${input.orderId}` });

/** A transactional step whose handler only records: its ledger row may already exist. */
const recordsOnly = workflow('wt-cost-reuse', { version: 1, input: z.object({ orderId: z.string() }) }).transactional(
  'note',
  {
    output: z.object({ noted: z.number() }),
    key: ({ input }) => `note:${input.orderId}`,
  },
);

interface Logged {
  readonly sql: string;
  /** Events emitted before this statement was sent. */
  readonly afterEvents: number;
}

describe('worker: commits and round trips per step [pg]', () => {
  let base: TestStore;
  let store: Store;
  const logged: Logged[] = [];
  const events: WorkerEvent[] = [];

  beforeAll(async () => {
    base = await createPgTestStore();
    await migrateForTest(base, [costed, recordsOnly]);
    await setupAppSchema(base);
    store = countingStore(base.url!, (text) => logged.push({ sql: text, afterEvents: events.length }));
  });
  afterAll(async () => {
    await store.close();
    await base.close();
  });

  it('costs nothing of its own per carried plain step, 4 + handler statements and 1 commit per transactional carrying one (1 and 1 if its handler sends none), 1 and 1 per external after a commit that wrote its intent', async () => {
    const payments = new FakePaymentProvider();
    const registration = bindHandlers(
      costed,
      {
        compute: () => ({ amountCents: 1_000 }),
        write: async ({ tx, runId, input, record }) => {
          const row = await tx
            .insertInto('wt_app.reservation')
            .values({ run_id: runId, order_id: input.orderId, quantity: 1 })
            .returning('id')
            .executeTakeFirstOrThrow();
          return record({ rowId: row.id });
        },
        call: {
          perform: async ({ key, input }) => {
            const charge = await payments.charge(
              { reference: input.orderId, amountCents: 1_000, currency: 'eur', customerId: 'c' },
              { idempotencyKey: key },
            );
            return { chargeId: charge.id };
          },
        },
        finish: () => ({ done: true }),
        note: async ({ record }) => record({ noted: true }),
      } satisfies Parameters<typeof bindHandlers<typeof costed, AppDatabase>>[1],
      shapeHash(costed),
    );
    const runId = await startTestRun(base, costed, { orderId: 'cost-1' });
    const worker = createWorker({
      store,
      workflows: [registration],
      concurrency: 1,
      leaseMs: 60_000,
      pollIntervalMs: 60_000,
      reconcileIntervalMs: 0,
      onEvent: (event) => {
        events.push(event);
        if (event.type === 'run-completed') completed();
      },
    });
    // Not drain(): its own progress queries would land in the measured windows.
    let completed!: () => void;
    const done = new Promise<void>((resolve) => (completed = resolve));
    await worker.start();
    await done;
    await worker.stop();
    expect((await runState(base, runId)).run.status).toBe('completed');

    // Statements sent between two events belong to the step that the later event reports. A plain
    // step's result rides on the next commit (carried-prefix.ts) and its event comes with that
    // commit, first: its window holds the carrying step's statements, and the carrying step's is empty.
    const claimedAt = events.findIndex((e) => e.type === 'run-claimed');
    const stepEnds = events.flatMap((e, i) => (e.type === 'step-succeeded' ? [{ step: e.step, index: i }] : []));
    const window = (from: number, to: number): string[] =>
      logged.filter((q) => q.afterEvents > from && q.afterEvents <= to).map((q) => q.sql);
    const claim = logged.filter((q) => q.afterEvents === claimedAt && /candidate AS/.test(q.sql)).map((q) => q.sql);
    const costs = stepEnds.map(({ step, index }, i) => {
      const statements = window(i === 0 ? claimedAt : stepEnds[i - 1]!.index, index);
      return { step, roundTrips: statements.length, commits: commitsIn(statements) };
    });

    const table = [
      '| what | round trips | commits |',
      '|---|---|---|',
      `| claim (once per run, opens the first attempt) | ${claim.length} | ${commitsIn(claim)} |`,
      ...costs.map(
        (c) => `| ${c.step} (${costed.steps.find((s) => s.name === c.step)!.kind}) | ${c.roundTrips} | ${c.commits} |`,
      ),
    ].join('\n');
    console.log(`Per-step cost on PostgreSQL (driver-counted):\n${table}`);

    expect(claim).toHaveLength(1);
    expect(costs).toEqual([
      // write's transaction, carrying compute: BEGIN, compute's result + write's attempt + its ledger
      // row (one statement), the handler's INSERT, result + transition, COMMIT.
      { step: 'compute', roundTrips: 5, commits: 1 },
      { step: 'write', roundTrips: 0, commits: 0 },
      // No intent commit of its own: write's commit (its "result + transition" statement) wrote
      // call's intent (step-commits.ts NextIntent). Then the result commit.
      { step: 'call', roundTrips: 1, commits: 1 },
      // note's one statement, carrying finish: finish's result and attempt, note's ledger row, result,
      // attempt and the completion — no BEGIN, no COMMIT.
      { step: 'finish', roundTrips: 1, commits: 1 },
      { step: 'note', roundTrips: 0, commits: 0 },
    ]);
    const { rows } = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM wt_app.reservation WHERE run_id = ${runId}`.execute(base.db);
    expect(rows[0]!.n).toBe(1);
  });

  it('reuses a recorded ledger row of a transactional step whose handler sends no statement', async () => {
    let calls = 0;
    const registration = bindHandlers(
      recordsOnly,
      {
        note: async ({ record }) => {
          calls += 1;
          return record({ noted: calls });
        },
      },
      shapeHash(recordsOnly),
    );
    const runId = await startTestRun(base, recordsOnly, { orderId: 'reuse-1' });
    // A recorded row the run never moved past (planted; e.g. left by an earlier deploy).
    const hash = requestHash({ input: { orderId: 'reuse-1' }, steps: {} });
    await sql`
      INSERT INTO ledgerflow.step_effect (workflow_id, step_name, idempotency_key, effect, status, kind, request_hash, attempt, fencing_token, recorded_at)
      VALUES (${runId}, 'note', 'note:reuse-1', '{"noted": 777}'::jsonb, 'recorded', 'transactional', ${hash}, 1, 0, now())`.execute(
      base.db,
    );
    const seen: WorkerEvent[] = [];
    const worker = createWorker({
      store: base,
      workflows: [registration],
      concurrency: 1,
      pollIntervalMs: 50,
      reconcileIntervalMs: 0,
      onEvent: (e) => seen.push(e),
    });
    await worker.drain();
    await worker.stop();

    const { run, results, effects } = await runState(base, runId);
    expect(run.status).toBe('completed');
    expect(results.map((r) => r.output)).toEqual([{ noted: 777 }]);
    expect(effects).toEqual([expect.objectContaining({ idempotency_key: 'note:reuse-1', effect: { noted: 777 } })]);
    expect(seen.find((e) => e.type === 'step-succeeded')).toMatchObject({ reused: true });
  });
});
