import { describe, expect, it } from 'vitest';
import { runBatch, type BatchCounts } from './fuzz-batch.js';
import type { Violation } from './fuzz-checks.js';
import { REGRESSION_SEEDS } from './regression-seeds.js';

/**
 * The composition fuzzer (issue 24): random workflows composed from every construct, driven by
 * random operator actions and faults on PostgreSQL with worker child processes, checked after
 * each batch (tests/fuzz/fuzz-checks.ts says what). The short budget runs in `npm run test:chaos`;
 * `npm run soak:fuzz` runs the long one.
 *
 * Replay a failing composition with its seed (printed with every violation):
 *   LEDGERFLOW_FUZZ_SEED=123 npx vitest run --project chaos tests/fuzz/fuzz.test.ts
 * A seed given this way runs alone in its batch, several times (LEDGERFLOW_FUZZ_REPEAT, default 3):
 * process timing is not replayed, so a violation that needs a race shows up most, not all, times.
 *
 * Every run first replays the seeds that found defects (regression-seeds.ts) as one batch.
 *
 * Env: LEDGERFLOW_FUZZ_COMPOSITIONS (default 200), LEDGERFLOW_FUZZ_BATCH (compositions per batch,
 * default 40), LEDGERFLOW_FUZZ_FIRST_SEED (default: from the date, printed).
 */
const replaySeed = process.env['LEDGERFLOW_FUZZ_SEED'];
const compositions = Number(process.env['LEDGERFLOW_FUZZ_COMPOSITIONS'] ?? 200);
const batchSize = Number(process.env['LEDGERFLOW_FUZZ_BATCH'] ?? 40);
const firstSeed = Number(process.env['LEDGERFLOW_FUZZ_FIRST_SEED'] ?? Math.floor(Date.now() / 86_400_000) * 1_000);

function batches(): number[][] {
  if (replaySeed !== undefined) {
    const repeat = Number(process.env['LEDGERFLOW_FUZZ_REPEAT'] ?? 3);
    return Array.from({ length: repeat }, () => replaySeed.split(',').map(Number));
  }
  const seeds = Array.from({ length: compositions }, (_, i) => firstSeed + i);
  // The seeds that found defects first, as a batch of their own (tests/fuzz/regression-seeds.ts).
  const regressions = REGRESSION_SEEDS.map((r) => r.seed);
  return [
    regressions,
    ...Array.from({ length: Math.ceil(seeds.length / batchSize) }, (_, i) =>
      seeds.slice(i * batchSize, (i + 1) * batchSize),
    ),
  ];
}

function add(total: BatchCounts, counts: BatchCounts): void {
  total.compositions += counts.compositions;
  total.runs += counts.runs;
  for (const part of ['actions', 'faults', 'checks'] as const) {
    for (const [kind, n] of Object.entries(counts[part])) total[part][kind] = (total[part][kind] ?? 0) + n;
  }
}

describe('composition fuzzer', () => {
  it(`keeps every invariant where features meet (${replaySeed !== undefined ? `seed ${replaySeed}` : `${compositions} compositions from seed ${firstSeed}`})`, {
    timeout: 3_600_000,
  }, async () => {
    const total: BatchCounts = { compositions: 0, runs: 0, actions: {}, faults: {}, checks: {} };
    const violations: Violation[] = [];
    for (const seeds of batches()) {
      const outcome = await runBatch({
        seeds,
        workers: 2,
        concurrency: 2,
        activeMs: 3_500,
        settleMs: 10_000,
        log: (line) => console.log(line),
      });
      add(total, outcome.counts);
      violations.push(...outcome.violations);
      for (const v of outcome.violations) console.log(`[fuzz] seed ${v.seed}: ${v.check}: ${v.message}`);
    }
    const unique = [...new Map(violations.map((v) => [`${v.seed} ${v.check}`, v])).values()];
    console.log(
      `[fuzz] ${total.compositions} compositions, ${total.runs} runs\n` +
        `[fuzz] actions: ${JSON.stringify(total.actions)}\n[fuzz] faults: ${JSON.stringify(total.faults)}\n[fuzz] checks: ${JSON.stringify(total.checks)}\n` +
        `[fuzz] ${unique.length} violation(s)${unique.length > 0 ? `; replay one with LEDGERFLOW_FUZZ_SEED=<seed> npx vitest run --project chaos tests/fuzz/fuzz.test.ts` : ''}`,
    );
    expect(unique.map((v) => `seed ${v.seed}: ${v.check}: ${v.message}`)).toEqual([]);
  });
});
