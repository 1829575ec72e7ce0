import type { FakePaymentProvider } from '../examples/fakes/payment-provider.js';

/**
 * The check every end-to-end measurement passes before its numbers count, ledgerflow's
 * (bench/workloads/end-to-end.ts) and each peer's (bench/peers/main.ts):
 * a three-step workflow writes exactly one application row and charges the provider once under
 * its own key, and a one-step workflow does neither. A throughput bought by writing twice, or by
 * skipping a write, is no throughput.
 */
export interface ProviderCounts {
  /** Charges the provider applied (a repeated key with the same request is a replay, not a charge). */
  readonly charges: number;
  /** Distinct idempotency keys charged. */
  readonly chargedKeys: number;
  /** Charge requests received, replays included: more than `charges` means a key was called again. */
  readonly requests: number;
}

export interface ReservationCounts {
  /** Rows in bench_app.reservation. */
  readonly rows: number;
  /** Distinct run ids among them. */
  readonly runs: number;
}

export interface ExactlyOnceObservation {
  readonly workload: 'one-step' | 'three-step';
  /** Workflows the measurement ran, warm-up included. */
  readonly workflows: number;
  readonly reservations: ReservationCounts;
  /** Absent when the provider was shared with other measurements (`npm run bench`): rows only. */
  readonly provider?: ProviderCounts;
}

/** What is wrong with a measurement's effects, one sentence each; empty when every effect happened once. */
export function exactlyOnceProblems(o: ExactlyOnceObservation): string[] {
  const expected = o.workload === 'three-step' ? o.workflows : 0;
  const problems: string[] = [];
  const { rows, runs } = o.reservations;
  if (rows !== expected || runs !== expected) {
    problems.push(
      `${o.workflows} ${o.workload} workflows wrote ${rows} application rows for ${runs} workflows (expected ${expected} rows, one per workflow)`,
    );
  }
  if (!o.provider) return problems;
  const { charges, chargedKeys, requests } = o.provider;
  if (charges !== expected || chargedKeys !== expected) {
    problems.push(
      `${o.workflows} ${o.workload} workflows made ${charges} provider charges under ${chargedKeys} keys (expected ${expected}, one per workflow)`,
    );
  }
  if (requests !== charges) {
    problems.push(
      `the provider was called ${requests} times for ${charges} charges: ${requests - charges} calls repeated a key already charged`,
    );
  }
  return problems;
}

/** Throws, naming the engine, unless every effect of the measurement happened exactly once. */
export function expectExactlyOnce(engine: string, o: ExactlyOnceObservation): void {
  const problems = exactlyOnceProblems(o);
  if (problems.length > 0) throw new Error(`${engine} failed the exactly-once check: ${problems.join('; ')}.`);
}

/** The counts {@link exactlyOnceProblems} checks, from the provider the workflows called. */
export function providerCounts(payments: FakePaymentProvider): ProviderCounts {
  const stats = payments.stats();
  return { charges: stats.totalCharges, chargedKeys: Object.keys(stats.chargesByKey).length, requests: stats.requests };
}
