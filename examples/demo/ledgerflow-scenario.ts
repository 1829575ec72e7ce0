import { fileURLToPath } from 'node:url';
import { createClient, migrate, openStore, type RunStatus } from 'ledgerflow/runtime';
import type { FaultSpec } from 'ledgerflow/testing';
import { FakeEmailProvider } from '../fakes/email-provider.js';
import { startFakeServer } from '../fakes/fake-server.js';
import { FakePaymentProvider } from '../fakes/payment-provider.js';
import type { AppDatabase } from '../migrations/app-database.js';
import { orderPayment } from '../order-payment/order-payment.workflow.js';
import { jsonLines, runScript } from './child-process.js';
import type { DemoOrder } from './demo-orders.js';
import type { NaiveCrash } from './naive-queue.js';

const GENERATED_MIGRATIONS = fileURLToPath(new URL('../../generated/migrations', import.meta.url));
const APP_MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

export interface WorkerRound {
  readonly workerId: string;
  readonly faults: boolean;
  /** `killed`: SIGKILLed by its fault point; `finished`: drained and exited 0. */
  readonly outcome: 'killed' | 'finished';
  /** The provider call that had just returned when the process was killed. */
  readonly crash?: NaiveCrash;
}

export interface LedgerflowResult {
  readonly location: string;
  readonly workers: readonly WorkerRound[];
  readonly runsByStatus: Readonly<Partial<Record<RunStatus, number>>>;
  /** From the payment provider's own counters: charges applied per order id. */
  readonly chargesPerOrder: Readonly<Record<string, number>>;
  /** From the email provider's own counters: receipts delivered per order id. */
  readonly receiptsPerOrder: Readonly<Record<string, number>>;
  /** Requests the payment provider answered with an earlier charge because the key repeated. */
  readonly providerReplays: number;
  /** From `ledgerflow.step_attempt`. */
  readonly attempts: {
    readonly total: number;
    readonly retries: number;
    readonly byStep: Readonly<Record<string, number>>;
  };
  /** From `ledgerflow.step_effect`: ledger rows resolved by reconcile, with how. */
  readonly reconciliations: ReadonlyArray<{
    readonly orderId: string;
    readonly step: string;
    readonly resolution: string;
  }>;
  /** From the shop's own tables, written by the transactional step. */
  readonly payments: { readonly rows: number; readonly revenueCents: number };
  /** The extra order the shop cancelled before its payment was recorded: its run's status and what the payment provider counted for it. */
  readonly compensation: {
    readonly orderId: string;
    readonly status: RunStatus;
    readonly charges: number;
    readonly refunds: number;
    readonly refundedCents: number;
  };
}

export interface LedgerflowScenarioOptions {
  /** PGlite data directory (ignored when DATABASE_URL is set). */
  readonly dataDir: string;
  readonly orders: readonly DemoOrder[];
  /**
   * One more order, started once the others are done, that the shop cancels before its payment is
   * recorded: `recordPayment` refuses it and the run's compensation refunds the charge.
   */
  readonly cancelledOrder: DemoOrder;
  /** How many workers to SIGKILL before one runs without faults. */
  readonly kills: number;
  readonly seed: number;
  readonly log: (line: string) => void;
}

/**
 * Migrates, starts one `order-payment` run per order, then runs worker child processes: the
 * first `kills` with the `after-perform` fault point set to SIGKILL (concurrency 1, so each
 * death has one known crash point), then one without faults until nothing is left; then one more
 * for an order the shop cancelled, whose run is compensated (its charge refunded). PGlite is
 * single-process, so this process closes its store before a worker opens the data directory.
 */
export async function runLedgerflowScenario(options: LedgerflowScenarioOptions): Promise<LedgerflowResult> {
  const payments = new FakePaymentProvider();
  const email = new FakeEmailProvider();
  const server = await startFakeServer({ payments, email });
  try {
    const store = await openStore({ dataDir: options.dataDir });
    const location = store.location;
    const runIds: string[] = [];
    try {
      const { applied } = await migrate(store, { sources: [GENERATED_MIGRATIONS, APP_MIGRATIONS] });
      options.log(`migrated ${location} (${applied.length} new migration(s))`);
      const client = createClient({ store });
      for (const order of options.orders) {
        runIds.push((await client.start(orderPayment, order, { dedupeKey: `order:${order.orderId}` })).runId);
      }
      options.log(`started ${runIds.length} order-payment runs`);
    } finally {
      await store.close();
    }

    const workers = await runWorkers(options, server.url);
    const cancelledRunId = await runCancelledOrder(options, server.url);

    const reopened = await openStore({ dataDir: options.dataDir });
    try {
      const db = reopened.db.withTables<AppDatabase>();
      const runs = await db
        .selectFrom('ledgerflow.workflow_run')
        .select(['id', 'status', 'input'])
        .where('id', 'in', runIds)
        .execute();
      const orderOf = new Map(runs.map((r) => [r.id, (r.input as { orderId: string }).orderId]));
      const attempts = await db
        .selectFrom('ledgerflow.step_attempt')
        .select(['step_name', 'attempt'])
        .where('run_id', 'in', runIds)
        .execute();
      const reconciled = await db
        .selectFrom('ledgerflow.step_effect')
        .select(['workflow_id', 'step_name', 'resolution'])
        .where('workflow_id', 'in', runIds)
        .where('resolution', 'is not', null)
        .orderBy('intent_at')
        .execute();
      const orderIds = options.orders.map((o) => o.orderId);
      const paid = await db
        .selectFrom('shop.payment')
        .select((eb) => [
          eb.fn.countAll<number>().as('rows'),
          eb.fn.coalesce(eb.fn.sum<number>('amount_cents'), eb.lit(0)).as('cents'),
        ])
        .where('order_id', 'in', orderIds)
        .executeTakeFirstOrThrow();

      const cancelled = await db
        .selectFrom('ledgerflow.workflow_run')
        .select('status')
        .where('id', '=', cancelledRunId)
        .executeTakeFirstOrThrow();
      const refunds = payments.refundsForReference(options.cancelledOrder.orderId);

      const runsByStatus: Partial<Record<RunStatus, number>> = {};
      for (const run of runs) runsByStatus[run.status] = (runsByStatus[run.status] ?? 0) + 1;
      const byStep: Record<string, number> = {};
      for (const a of attempts) byStep[a.step_name] = (byStep[a.step_name] ?? 0) + 1;
      return {
        location,
        workers,
        runsByStatus,
        chargesPerOrder: Object.fromEntries(orderIds.map((id) => [id, payments.chargesForReference(id)])),
        receiptsPerOrder: Object.fromEntries(orderIds.map((id) => [id, email.sentForReference(`receipt:${id}`)])),
        providerReplays: payments.stats().replays,
        attempts: { total: attempts.length, retries: attempts.filter((a) => a.attempt > 1).length, byStep },
        reconciliations: reconciled.map((e) => ({
          orderId: orderOf.get(e.workflow_id) ?? e.workflow_id,
          step: e.step_name,
          resolution: e.resolution ?? '',
        })),
        payments: { rows: Number(paid.rows), revenueCents: Number(paid.cents) },
        compensation: {
          orderId: options.cancelledOrder.orderId,
          status: cancelled.status,
          charges: payments.chargesForReference(options.cancelledOrder.orderId),
          refunds: refunds.length,
          refundedCents: refunds.reduce((sum, r) => sum + r.amountCents, 0),
        },
      };
    } finally {
      await reopened.close();
    }
  } finally {
    await server.close();
  }
}

/**
 * Cancels `cancelledOrder` in the shop's tables, starts its run and lets one worker process (no
 * faults) take it through: charged, refused by `recordPayment`, refunded by `refundCharge`.
 */
async function runCancelledOrder(options: LedgerflowScenarioOptions, servicesUrl: string): Promise<string> {
  const order = options.cancelledOrder;
  const store = await openStore({ dataDir: options.dataDir });
  let runId: string;
  try {
    await store.db
      .withTables<AppDatabase>()
      .insertInto('shop.order_cancellation')
      .values({ order_id: order.orderId, reason: 'withdrawn by the customer' })
      .execute();
    runId = (await createClient({ store }).start(orderPayment, order, { dedupeKey: `order:${order.orderId}` })).runId;
  } finally {
    await store.close();
  }
  const workerId = 'demo-worker-compensation';
  const result = await runScript(
    './worker-process.ts',
    {
      DEMO_SERVICES_URL: servicesUrl,
      DEMO_WORKER_ID: workerId,
      DEMO_DATA_DIR: options.dataDir,
      DEMO_CONCURRENCY: '1',
      LEDGERFLOW_FAULTS: '',
    },
    60_000,
  );
  if (result.code !== 0)
    throw new Error(`${workerId} exited with ${result.code ?? result.signal}:\n${result.stderr.slice(-4000)}`);
  options.log(
    `order ${order.orderId}, cancelled before its payment was recorded: ${workerId} charged it, recordPayment refused it, and its compensation refunded the charge`,
  );
  return runId;
}

async function runWorkers(options: LedgerflowScenarioOptions, servicesUrl: string): Promise<WorkerRound[]> {
  const rounds: WorkerRound[] = [];
  let kills = 0;
  while (rounds.length < options.kills + 2) {
    const faults = kills < options.kills;
    const workerId = `demo-worker-${rounds.length + 1}`;
    // Seeds far apart per round: neighbouring mulberry32 seeds start with similar draws, which
    // would kill every restarted worker at the same (replayed) call.
    const spec: FaultSpec = {
      seed: options.seed * 7_919 + rounds.length * 104_729,
      points: { 'after-perform': { probability: 0.2, actions: ['kill'], times: 1 } },
    };
    const result = await runScript(
      './worker-process.ts',
      {
        DEMO_SERVICES_URL: servicesUrl,
        DEMO_WORKER_ID: workerId,
        DEMO_DATA_DIR: options.dataDir,
        DEMO_CONCURRENCY: faults ? '1' : '4',
        LEDGERFLOW_FAULTS: faults ? JSON.stringify(spec) : '',
      },
      60_000,
    );
    if (result.signal === 'SIGKILL') {
      const performed = jsonLines(result.stdout).flatMap((line) =>
        typeof line === 'object' && line !== null && 'performed' in line
          ? [(line as { performed: NaiveCrash }).performed]
          : [],
      );
      const crash = performed.at(-1);
      kills += 1;
      rounds.push({ workerId, faults, outcome: 'killed', ...(crash !== undefined ? { crash } : {}) });
      options.log(
        `${workerId} (fault after-perform → SIGKILL) was killed` +
          (crash !== undefined ? ` right after ${crash.step} returned for order ${crash.orderId}` : ''),
      );
      continue;
    }
    if (result.code !== 0) {
      throw new Error(`${workerId} exited with ${result.code ?? result.signal}:\n${result.stderr.slice(-4000)}`);
    }
    rounds.push({ workerId, faults, outcome: 'finished' });
    options.log(
      `${workerId} (${faults ? 'faults on, none fired' : 'no faults'}) ran until nothing was left and exited`,
    );
    return rounds;
  }
  throw new Error(
    `workers were killed ${kills} times and none finished; see the fault settings in ledgerflow-scenario.ts.`,
  );
}
