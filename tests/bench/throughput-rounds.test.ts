import { describe, expect, it } from 'vitest';
import type { ThroughputRow } from '../../bench/results-model.js';
import { type Measurement, type RoundMeasurements, summariseRounds } from '../../bench/throughput-rounds.js';

// The full bench's throughput table is the median of rounds in which W0, W1 and W2 ran back to
// back; its ratios are taken within a round, so a slow minute for the machine moves W0 and the
// drain together instead of one of them.
function row(workload: string, concurrency: number, stepsPerSecond: number, rollbacks?: number): ThroughputRow {
  return {
    workload,
    concurrency,
    steps: 1000,
    seconds: 1000 / stepsPerSecond,
    stepsPerSecond,
    ...(rollbacks === undefined ? {} : { rollbacks }),
  };
}

function round(concurrency: number, rates: Record<Measurement, number>, rollbacks = 0): RoundMeasurements {
  return {
    concurrency,
    rows: {
      'w0-statement': row('W0 floor (one statement)', concurrency, rates['w0-statement']),
      'w0-transaction': row('W0 as BEGIN + 4 statements + COMMIT', concurrency, rates['w0-transaction']),
      w1: row('W1 one-step drain', concurrency, rates.w1, rollbacks),
      w2: row('W2 three-step drain', concurrency, rates.w2, rollbacks),
    },
  };
}

describe('summariseRounds', () => {
  it('takes each ratio within its round and reports the median with its range', () => {
    const summary = summariseRounds(
      [
        // A slow round: everything halves, the ratios do not move.
        round(4, { 'w0-statement': 500, 'w0-transaction': 400, w1: 250, w2: 300 }),
        round(4, { 'w0-statement': 1000, 'w0-transaction': 800, w1: 500, w2: 700 }, 1),
        round(4, { 'w0-statement': 1000, 'w0-transaction': 900, w1: 400, w2: 600 }),
      ],
      [4],
    );
    const w1 = summary.durable.find((r) => r.workload.startsWith('W1'))!;
    const w2 = summary.durable.find((r) => r.workload.startsWith('W2'))!;
    // W1/W0 per round 0.5, 0.5, 0.4; the ratio of medians would read 400/1000 or 500/1000 by accident.
    expect(w1.ratioToFloor).toEqual({ median: 0.5, min: 0.4, max: 0.5 });
    expect(w2.ratioToFloor).toEqual({ median: 0.6, min: 0.6, max: 0.7 });
    // The row's own columns are its median round's; rollbacks are every round's.
    expect(w1.stepsPerSecond).toBe(400);
    expect(w1.rollbacks).toBe(1);
    expect(w1.rounds).toBe(3);
    expect(summary.floor.map((r) => r.stepsPerSecond)).toEqual([1000]);
    expect(summary.floor[0]!.ratioToFloor).toBeUndefined();
    expect(summary.floorAsTransaction.map((r) => r.stepsPerSecond)).toEqual([800]);
  });

  it('keeps concurrencies apart and in the order asked for', () => {
    const summary = summariseRounds(
      [
        round(1, { 'w0-statement': 600, 'w0-transaction': 400, w1: 300, w2: 420 }),
        round(16, { 'w0-statement': 1200, 'w0-transaction': 1000, w1: 1200, w2: 900 }),
      ],
      [1, 16],
    );
    expect(summary.durable.map((r) => [r.workload, r.concurrency, r.ratioToFloor?.median])).toEqual([
      ['W1 one-step drain', 1, 0.5],
      ['W1 one-step drain', 16, 1],
      ['W2 three-step drain', 1, 0.7],
      ['W2 three-step drain', 16, 0.75],
    ]);
  });
});
