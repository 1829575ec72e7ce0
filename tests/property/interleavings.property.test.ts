import { performance } from 'node:perf_hooks';
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { createClient, createWorker, type Worker } from 'ledgerflow/runtime';
import { runReconcilePass } from 'ledgerflow/operator';
import { configureFaults, onFaultFired, type FaultPointName } from 'ledgerflow/testing';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import { APP_SCHEMA_SQL, chaosHandlers, chaosOrder } from '../chaos/fixtures/chaos-workflow.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { createSeverablePgStore, type SeverableStore } from './support/severable-pg-store.js';

/**
 * Arbitrary interleavings of deliver / redeliver / crash-at-a-fault-point / kill / reconcile,
 * followed by a restart (a fault-free worker that finishes everything), end in the same
 * ledger as a crash-free run of the same inputs: the same effects under the same keys,
 * recorded once; the same step outputs (provider ids being the provider's own for that key);
 * one application row per run; one application per key at each provider.
 *
 * The model is `chaos-order` (step, transactional, external to a deduping provider, external
 * to a non-deduping provider with reconcile) with two runs, driven by real workers on
 * PostgreSQL. A "crash" cuts a worker off from the database (its sessions are terminated and
 * every later query fails) while its code may still be parked at the fault point or calling a
 * provider — what a SIGKILLed process looks like from the outside.
 */
const LEASE_MS = 400;
const OP_MS = 600;
const CRASH_POINTS: readonly FaultPointName[] = [
  'after-claim',
  'opening-step-transaction',
  'inside-transactional-handler',
  'before-step-commit',
  'after-intent-commit',
  'after-perform',
  'before-result-commit',
  'before-lease-renewal',
];

/** `deliver`/`redeliver` run one or two workers for `forMs`, then stop them gracefully (in-flight steps finish). */
type Op =
  | { readonly kind: 'deliver'; readonly forMs: number }
  | { readonly kind: 'redeliver'; readonly forMs: number }
  | { readonly kind: 'crash'; readonly point: FaultPointName }
  | { readonly kind: 'kill'; readonly afterMs: number }
  | { readonly kind: 'reconcile' };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.integer({ min: 0, max: 150 }).map((forMs): Op => ({ kind: 'deliver', forMs })),
  fc.integer({ min: 0, max: 150 }).map((forMs): Op => ({ kind: 'redeliver', forMs })),
  fc.constantFrom(...CRASH_POINTS).map((point): Op => ({ kind: 'crash', point })),
  fc.integer({ min: 0, max: 150 }).map((afterMs): Op => ({ kind: 'kill', afterMs })),
  fc.constant<Op>({ kind: 'reconcile' }),
);

let store: TestStore;
let adminUrl: string;
// A little latency keeps performs in flight long enough for kills to land inside them.
const payments = new FakePaymentProvider({ latencyMs: 15 });
const email = new FakeEmailProvider({ latencyMs: 15 });
const registration = chaosHandlers({ payments, email });
const zombies: Array<{ worker: Worker; store: SeverableStore }> = [];
let workerCount = 0;
/** What the generated interleavings actually did, so the test can show it exercised crashes. */
const tally = { crashesAtFaultPoints: 0, kills: 0, reconcilePasses: 0, stepsBeforeRestart: 0 };

function newWorker(reconcileIntervalMs = 0): { worker: Worker; store: SeverableStore } {
  workerCount += 1;
  const workerStore = createSeverablePgStore({
    connectionString: store.url!,
    adminUrl,
    applicationName: `prop-worker-${workerCount}`,
    maxConnections: 4,
  });
  const worker = createWorker({
    store: workerStore,
    workflows: [registration],
    workerId: `prop-worker-${workerCount}`,
    concurrency: 2,
    leaseMs: LEASE_MS,
    heartbeatMs: 100,
    pollIntervalMs: 20,
    reconcileIntervalMs,
  });
  return { worker, store: workerStore };
}

async function unfinished(prefix: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM ledgerflow.workflow_run
     WHERE workflow_name = ${chaosOrder.name} AND input->>'orderId' LIKE ${`${prefix}-%`}
       AND status NOT IN ('completed', 'failed', 'cancelled')`.execute(store.db);
  return rows[0]!.n;
}

async function committedSteps(prefix: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM ledgerflow.step_result s JOIN ledgerflow.workflow_run r ON r.id = s.run_id
     WHERE r.workflow_name = ${chaosOrder.name} AND r.input->>'orderId' LIKE ${`${prefix}-%`}`.execute(store.db);
  return rows[0]!.n;
}

async function settledOrTimeout(prefix: string, ms: number, stopEarly?: Promise<unknown>): Promise<void> {
  const deadline = performance.now() + ms;
  let stop = false;
  void stopEarly?.then(() => (stop = true));
  while (!stop && performance.now() < deadline && (await unfinished(prefix)) > 0) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A worker that dies: cut off now, stopped (without reaching the database) in the background. */
function crash(w: { worker: Worker; store: SeverableStore }): Promise<void> {
  zombies.push(w);
  return w.store.sever();
}

async function gracefully(w: { worker: Worker; store: SeverableStore }): Promise<void> {
  await w.worker.stop({ timeoutMs: 200 });
  await w.store.close();
}

async function apply(step: Op, prefix: string, seed: number): Promise<void> {
  switch (step.kind) {
    case 'deliver':
    case 'redeliver': {
      const ws = step.kind === 'deliver' ? [newWorker()] : [newWorker(), newWorker()];
      await Promise.all(ws.map((w) => w.worker.start()));
      await settledOrTimeout(prefix, step.forMs);
      await Promise.all(ws.map(gracefully));
      return;
    }
    case 'crash': {
      let fired!: () => void;
      const firing = new Promise<void>((resolve) => (fired = resolve));
      const unsubscribe = onFaultFired((f) => f.point === step.point && fired());
      configureFaults({
        seed,
        points: { [step.point]: { probability: 1, actions: ['hang'], hangMs: 30_000, times: 1 } },
      });
      const w = newWorker();
      try {
        await w.worker.start();
        await settledOrTimeout(prefix, OP_MS, firing);
        let didFire = false;
        await Promise.race([firing.then(() => (didFire = true)), Promise.resolve()]);
        if (didFire) {
          tally.crashesAtFaultPoints += 1;
          await crash(w);
        } else {
          await gracefully(w);
        }
      } finally {
        unsubscribe();
        configureFaults(undefined);
      }
      return;
    }
    case 'kill': {
      const w = newWorker();
      await w.worker.start();
      await new Promise((resolve) => setTimeout(resolve, step.afterMs));
      tally.kills += 1;
      await crash(w);
      return;
    }
    case 'reconcile': {
      // Intents become due lease + perform timeout after they were written (database time).
      await new Promise((resolve) => setTimeout(resolve, LEASE_MS + 500 + 50));
      await runReconcilePass({ store, workflows: [registration], leaseMs: LEASE_MS });
      tally.reconcilePasses += 1;
      return;
    }
  }
}

/** The ledger of the runs whose order ids start with `prefix`, with everything run-specific factored out. */
async function normalisedLedger(prefix: string): Promise<unknown> {
  const { rows } = await sql<{
    order_id: string;
    status: string;
    results: Record<string, Record<string, unknown>> | null;
    effects: Array<{ step: string; key: string; status: string; kind: string }> | null;
    app_rows: number[];
  }>`
    SELECT r.input->>'orderId' AS order_id, r.status,
           (SELECT jsonb_object_agg(s.step_name, s.output) FROM ledgerflow.step_result s WHERE s.run_id = r.id) AS results,
           (SELECT jsonb_agg(jsonb_build_object('step', e.step_name, 'key', e.idempotency_key, 'status', e.status, 'kind', e.kind)
                             ORDER BY e.step_name)
              FROM ledgerflow.step_effect e WHERE e.workflow_id = r.id) AS effects,
           ARRAY(SELECT a.id FROM chaos_app.reservation a WHERE a.run_id = r.id ORDER BY a.id)::int[] AS app_rows
      FROM ledgerflow.workflow_run r
     WHERE r.workflow_name = ${chaosOrder.name} AND r.input->>'orderId' LIKE ${`${prefix}-%`}
     ORDER BY r.input->>'orderId'`.execute(store.db);
  const strip = (value: string): string => value.replace(`${prefix}-`, '*-');
  const chargeIds = new Map(payments.charges().map((c) => [c.idempotencyKey, c.id]));
  const messageIds = new Map(email.messages().map((m) => [m.reference, m.messageId]));
  return rows.map((row) => {
    const results = row.results ?? {};
    const chargeKey = `charge:${row.order_id}`;
    const receiptKey = `receipt:${row.order_id}`;
    return {
      order: strip(row.order_id),
      status: row.status,
      price: results['price'],
      reservation:
        results['reserve']?.['reservationId'] === row.app_rows[0] ? 'the application row' : results['reserve'],
      charge:
        results['charge']?.['chargeId'] === chargeIds.get(chargeKey)
          ? 'the provider charge for its key'
          : results['charge'],
      receipt:
        results['receipt']?.['messageId'] === messageIds.get(receiptKey)
          ? 'the provider message for its key'
          : results['receipt'],
      effects: (row.effects ?? []).map((e) => ({ ...e, key: strip(e.key) })),
      applicationRows: row.app_rows.length,
      chargesForKey: payments.chargesForKey(chargeKey),
      chargesForOrder: payments.chargesForReference(row.order_id),
      emailsForKey: email.sentForReference(receiptKey),
    };
  });
}

async function startRuns(prefix: string): Promise<void> {
  const client = createClient({ store });
  for (const [i, quantity] of [2, 3].entries()) {
    await client.start(chaosOrder, {
      orderId: `${prefix}-${i}`,
      customerId: `c-${i}`,
      email: `p${i}@example.com`,
      quantity,
    });
  }
}

/** A fault-free worker with its reconciler on: what a restart brings up. */
async function restartAndFinish(prefix: string): Promise<void> {
  const w = newWorker(100);
  await w.worker.start();
  await settledOrTimeout(prefix, 20_000);
  await gracefully(w);
}

beforeAll(async () => {
  adminUrl = inject('postgresUrl');
  store = await createPgTestStore();
  await migrateForTest(store, [chaosOrder]);
  await sql.raw(APP_SCHEMA_SQL).execute(store.db);
});

afterAll(async () => {
  configureFaults(undefined);
  await Promise.all(zombies.map((z) => z.worker.stop({ timeoutMs: 0 }).catch(() => {})));
  await Promise.all(zombies.map((z) => z.store.close()));
  await store.close();
});

it('any interleaving of deliveries, crashes, kills and reconciles ends in the crash-free ledger', async () => {
  await startRuns('base');
  await restartAndFinish('base');
  const expected = await normalisedLedger('base');
  expect((expected as Array<{ status: string }>).map((r) => r.status)).toEqual(['completed', 'completed']);

  let example = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(op, { minLength: 1, maxLength: 4 }),
      fc.integer({ min: 1, max: 1_000_000 }),
      async (ops, seed) => {
        const prefix = `ex${++example}`;
        await startRuns(prefix);
        for (const step of ops) await apply(step, prefix, seed);
        tally.stepsBeforeRestart += await committedSteps(prefix);
        await restartAndFinish(prefix);
        expect(await normalisedLedger(prefix)).toEqual(expected);
      },
    ),
    { numRuns: 15, endOnFailure: true },
  );
  console.log(`interleavings: ${JSON.stringify(tally)}`);
  // Otherwise the property held only over histories in which nothing went wrong.
  expect(tally.crashesAtFaultPoints + tally.kills).toBeGreaterThan(0);
  expect(tally.stepsBeforeRestart).toBeGreaterThan(0);
}, 240_000);
