import pg from 'pg';
import type { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';
import type { FakeRefundDesk } from '../support/refund-desk.js';
import { seededRandom } from './seeded-random.js';
import { chaosRefund, type ChaosRefundInput, type ChaosRefundOutcome } from './fixtures/chaos-refund-workflow.js';

/** What the compensating runs of a chaos run must show (issue 17). */
export interface CompensationReport {
  readonly runs: number;
  readonly completed: number;
  readonly compensated: number;
  /** Runs whose refund was designed to be refused, ended `compensation_failed` as they must. */
  readonly compensationFailed: number;
  /** Refunds the desk applied. */
  readonly refunds: number;
  /** Runs that ended compensated with a charge at the provider (each must have exactly one refund). */
  readonly chargedAndCompensated: number;
  /** Runs compensated after a cancel (`cancel` orders whose cancel came before the run failed on its own). */
  readonly cancelled: number;
  /** Charge intents a compensation settled by sending the key again (recorded or released by it). */
  readonly takenOver: number;
  /** Refunds beyond one per charge. */
  readonly duplicates: number;
  readonly violations: readonly string[];
}

/**
 * The `chaos-refund` orders of a chaos run: about half charge and then fail for good (they must
 * compensate), a tenth have a refund the desk refuses (they must end `compensation_failed`), the
 * rest complete. Drawn from a stream of their own, so the controller's decisions replay as before.
 */
export function chaosRefundInputs(seed: number, count: number): ChaosRefundInput[] {
  const random = seededRandom((seed ^ 0x2ef0_4d17) >>> 0);
  return Array.from({ length: count }, (_, i) => {
    const dice = random.next();
    const outcome: ChaosRefundOutcome =
      dice < 0.4 ? 'compensate' : dice < 0.5 ? 'refund-refused' : dice < 0.7 ? 'cancel' : 'complete';
    return { orderId: `refund-${seed}-${i}`, amountCents: 100 * random.int(1, 50), outcome };
  });
}

const STATUS_BY_OUTCOME: Readonly<Record<ChaosRefundOutcome, string>> = {
  complete: 'completed',
  compensate: 'compensated',
  'refund-refused': 'compensation_failed',
  cancel: 'compensated',
};

/**
 * Checks, from the providers' own counters and the database: every run ended as its outcome
 * says; every order was charged exactly once (a cancelled one at most once); refunds = charges of the runs that ended
 * compensated — exactly one per such charge, none for any other, never more than one for any
 * charge; no run is `compensation_failed` unless its refund was designed to be refused (and then
 * nothing was refunded and its refund is released, not left open); the ledger's recorded refunds
 * are exactly the desk's, with the desk's ids.
 */
export async function checkCompensationInvariants(
  url: string,
  expected: readonly ChaosRefundInput[],
  providers: { readonly payments: FakePaymentProvider; readonly refunds: FakeRefundDesk },
): Promise<CompensationReport> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const violations: string[] = [];
  let duplicates = 0;
  try {
    const q = async <R extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<R[]> =>
      (await client.query<R>(text, params)).rows;
    const runs = await q<{
      id: string;
      order_id: string;
      status: string;
      compensation: string | null;
      error: { step?: string } | null;
    }>(
      `SELECT id, input->>'orderId' AS order_id, status, compensation, error FROM ledgerflow.workflow_run WHERE workflow_name = $1`,
      [chaosRefund.name],
    );
    const byOrder = new Map(runs.map((r) => [r.order_id, r]));
    const chargeIds = new Map(providers.payments.charges().map((c) => [c.idempotencyKey, c.id]));
    const refundsByCharge = providers.refunds.refundsByCharge();
    const compensatedCharges = new Set<string>();
    for (const order of expected) {
      const run = byOrder.get(order.orderId);
      const where = `refund order ${order.orderId} (${order.outcome})`;
      if (run === undefined) {
        violations.push(`${where}: no chaos-refund run`);
        continue;
      }
      const status = STATUS_BY_OUTCOME[order.outcome];
      if (run.status !== status)
        violations.push(
          `${where}: run ${run.id} ended ${run.status}, expected ${status}: ${JSON.stringify(run.error)}`,
        );
      if (order.outcome === 'cancel') {
        // Cancelled, or — had the cancel come after confirm gave up — failed and compensated.
        if (run.compensation !== 'cancel' && !(run.compensation === 'failure' && run.error?.step === 'confirm')) {
          violations.push(
            `${where}: run ${run.id} compensation ${run.compensation}, error ${JSON.stringify(run.error)}`,
          );
        }
      } else if (
        order.outcome !== 'complete' &&
        (run.compensation !== 'failure' || run.error?.step !== (order.outcome === 'compensate' ? 'confirm' : 'refund'))
      ) {
        violations.push(`${where}: run ${run.id} compensation ${run.compensation}, error ${JSON.stringify(run.error)}`);
      }
      const chargeKey = `charge:${order.orderId}`;
      const charges = providers.payments.chargesForKey(chargeKey);
      // A cancel may come before the charge was ever sent: then nothing is charged, nothing refunded.
      if (order.outcome === 'cancel' ? charges > 1 : charges !== 1)
        violations.push(`${where}: charged ${charges} times`);
      const chargeId = chargeIds.get(chargeKey);
      const refunds = chargeId === undefined ? 0 : (refundsByCharge.get(chargeId) ?? 0);
      const wanted = order.outcome === 'compensate' || order.outcome === 'cancel' ? charges : 0;
      if (refunds !== wanted)
        violations.push(`${where}: charge ${chargeId} refunded ${refunds} times, expected ${wanted}`);
      if (run.status === 'compensated' && chargeId !== undefined) compensatedCharges.add(chargeId);
    }
    // Never more refunds than charges, and only charges of compensated runs are refunded.
    for (const [chargeId, n] of refundsByCharge) {
      if (n > 1) {
        duplicates += n - 1;
        violations.push(`charge ${chargeId} refunded ${n} times`);
      }
      if (!compensatedCharges.has(chargeId))
        violations.push(`charge ${chargeId} refunded, but its run did not end compensated`);
    }
    // The ledger's refunds are the desk's: same keys, same ids; a refused refund is released.
    const rows = await q<{
      run_status: string;
      idempotency_key: string;
      status: string;
      effect: { refundId?: string } | null;
    }>(
      `SELECT r.status AS run_status, e.idempotency_key, e.status, e.effect
         FROM ledgerflow.step_effect e JOIN ledgerflow.workflow_run r ON r.id = e.workflow_id
        WHERE r.workflow_name = $1 AND e.step_name = 'refund'`,
      [chaosRefund.name],
    );
    const deskByKey = new Map(providers.refunds.refunds().map((r) => [r.key, r.refundId]));
    const recordedKeys = new Set<string>();
    for (const row of rows) {
      if (row.status === 'recorded') {
        recordedKeys.add(row.idempotency_key);
        const refundId = deskByKey.get(row.idempotency_key);
        if (row.effect?.refundId !== refundId)
          violations.push(
            `ledger refund ${row.idempotency_key} records ${row.effect?.refundId}, the desk has ${refundId}`,
          );
      } else if (!(row.status === 'released' && row.run_status === 'compensation_failed')) {
        violations.push(`ledger refund ${row.idempotency_key} left ${row.status} (run ${row.run_status})`);
      }
    }
    for (const key of deskByKey.keys())
      if (!recordedKeys.has(key)) violations.push(`desk refunded under ${key}, missing from the ledger`);
    // A charge intent a compensation settled: it says so in the ledger row's resolution.
    const takenOver = await q<{ n: number }>(
      `SELECT count(*)::int AS n FROM ledgerflow.step_effect e JOIN ledgerflow.workflow_run r ON r.id = e.workflow_id
        WHERE r.workflow_name = $1 AND e.step_name = 'charge'
          AND (e.resolution LIKE 'recorded by compensation %' OR e.resolution LIKE 'released: the provider refused key % when compensation %')`,
      [chaosRefund.name],
    );
    const count = (status: string) => runs.filter((r) => r.status === status).length;
    return {
      runs: runs.length,
      completed: count('completed'),
      compensated: count('compensated'),
      compensationFailed: count('compensation_failed'),
      refunds: providers.refunds.refunds().length,
      chargedAndCompensated: compensatedCharges.size,
      cancelled: runs.filter((r) => r.status === 'compensated' && r.compensation === 'cancel').length,
      takenOver: takenOver[0]!.n,
      duplicates,
      violations,
    };
  } finally {
    await client.end();
  }
}
