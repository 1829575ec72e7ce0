import type { ChaosOptions } from './chaos-run.js';

/** A chaos run's size and pacing: everything but the seed and the log. */
export type ChaosProfile = Omit<ChaosOptions, 'seed' | 'log'>;

/**
 * The chaos run of every `.ci/run` (`npm run test:chaos`): at least 1 000 runs, 100 worker
 * SIGKILLs, 50 backend terminations and one server crash in a few minutes on two cores. The
 * kill and termination targets sit above those minimums because some tries find no live worker
 * or backend to hit (all of them restarting, the server down); chaos.test.ts asserts the minimums.
 */
export const CI_CHAOS: ChaosProfile = {
  runs: 1_000,
  workers: 6,
  concurrency: 4,
  chaosMs: 120_000,
  serverRestarts: 1,
  kills: 110,
  backendTerminations: 80,
  tickMs: { min: 100, max: 400 },
  settleTimeoutMs: 300_000,
};

/** What every CI chaos run must have done, whatever the seed and the machine's load. */
export const CI_CHAOS_MINIMUMS = { runs: 1_000, kills: 100, backendTerminations: 50, serverRestarts: 1 } as const;

/** `LEDGERFLOW_SOAK=1 npm run test:chaos` (`npm run test:soak`): longer, four server crashes. */
export const TEST_SOAK_CHAOS: ChaosProfile = {
  runs: 2_000,
  workers: 5,
  concurrency: 4,
  chaosMs: 300_000,
  serverRestarts: 4,
  kills: 300,
  backendTerminations: 150,
  tickMs: { min: 150, max: 650 },
  settleTimeoutMs: 300_000,
};

/** `npm run soak` (bench/soak/main.ts): 10 000 runs, its summary line kept in bench/results/. */
export const SOAK_CHAOS: ChaosProfile = {
  runs: 10_000,
  workers: 5,
  concurrency: 4,
  chaosMs: 900_000,
  serverRestarts: 10,
  kills: 1_100,
  backendTerminations: 800,
  tickMs: { min: 100, max: 400 },
  settleTimeoutMs: 900_000,
};

/**
 * What a full soak must have done (bench/soak/main.ts checks it): ten times the CI minimums. Its
 * targets are higher because on a loaded machine many tries find every worker restarting.
 */
export const SOAK_CHAOS_MINIMUMS = {
  runs: 10_000,
  kills: 1_000,
  backendTerminations: 500,
  serverRestarts: 10,
} as const;
