import { describe, expect, it } from 'vitest';
import { exactlyOnceProblems, expectExactlyOnce, providerCounts } from '../../bench/exactly-once.js';
import { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';

// The check `npm run bench:peers` and `npm run bench` pass every end-to-end measurement through
// before its numbers count: a peer that wrote twice or charged twice must fail the run.
const clean = { charges: 10, chargedKeys: 10, requests: 10 };

describe('exactlyOnceProblems', () => {
  it('accepts one row and one charge per three-step workflow, and nothing for one step', () => {
    expect(
      exactlyOnceProblems({
        workload: 'three-step',
        workflows: 10,
        reservations: { rows: 10, runs: 10 },
        provider: clean,
      }),
    ).toEqual([]);
    expect(
      exactlyOnceProblems({
        workload: 'one-step',
        workflows: 10,
        reservations: { rows: 0, runs: 0 },
        provider: { charges: 0, chargedKeys: 0, requests: 0 },
      }),
    ).toEqual([]);
  });

  it('names a second row for one workflow, and a missing one', () => {
    const twice = exactlyOnceProblems({
      workload: 'three-step',
      workflows: 10,
      reservations: { rows: 11, runs: 10 },
      provider: clean,
    });
    expect(twice).toEqual([
      '10 three-step workflows wrote 11 application rows for 10 workflows (expected 10 rows, one per workflow)',
    ]);
    const missing = exactlyOnceProblems({
      workload: 'three-step',
      workflows: 10,
      reservations: { rows: 9, runs: 9 },
      provider: clean,
    });
    expect(missing).toHaveLength(1);
  });

  it('names a row written by a one-step workflow', () => {
    expect(
      exactlyOnceProblems({
        workload: 'one-step',
        workflows: 10,
        reservations: { rows: 1, runs: 1 },
        provider: { charges: 0, chargedKeys: 0, requests: 0 },
      }),
    ).toHaveLength(1);
  });

  it('names two charges for one workflow, and a key called again even though the provider deduplicated it', () => {
    const twoKeys = exactlyOnceProblems({
      workload: 'three-step',
      workflows: 10,
      reservations: { rows: 10, runs: 10 },
      provider: { charges: 11, chargedKeys: 11, requests: 11 },
    });
    expect(twoKeys).toEqual([
      '10 three-step workflows made 11 provider charges under 11 keys (expected 10, one per workflow)',
    ]);
    const calledAgain = exactlyOnceProblems({
      workload: 'three-step',
      workflows: 10,
      reservations: { rows: 10, runs: 10 },
      provider: { ...clean, requests: 12 },
    });
    expect(calledAgain).toEqual([
      'the provider was called 12 times for 10 charges: 2 calls repeated a key already charged',
    ]);
  });

  it('checks only the rows when the provider was shared with other measurements', () => {
    expect(
      exactlyOnceProblems({ workload: 'three-step', workflows: 10, reservations: { rows: 10, runs: 10 } }),
    ).toEqual([]);
  });
});

describe('expectExactlyOnce', () => {
  it('throws naming the engine and every problem', () => {
    expect(() =>
      expectExactlyOnce('Some engine', {
        workload: 'three-step',
        workflows: 2,
        reservations: { rows: 3, runs: 2 },
        provider: { charges: 2, chargedKeys: 2, requests: 3 },
      }),
    ).toThrow(
      /^Some engine failed the exactly-once check: 2 three-step workflows wrote 3 application rows .*; the provider was called 3 times/,
    );
  });
});

describe('providerCounts', () => {
  it('counts a replayed key as a request, not a charge', async () => {
    const payments = new FakePaymentProvider();
    const request = { reference: 'r', amountCents: 100, currency: 'eur', customerId: 'c' };
    await payments.charge(request, { idempotencyKey: 'k1' });
    await payments.charge(request, { idempotencyKey: 'k1' });
    await payments.charge(request, { idempotencyKey: 'k2' });
    expect(providerCounts(payments)).toEqual({ charges: 2, chargedKeys: 2, requests: 3 });
  });
});
