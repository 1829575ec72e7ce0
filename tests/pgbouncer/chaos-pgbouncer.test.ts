import { randomInt } from 'node:crypto';
import { expect, it } from 'vitest';
import { runChaos } from '../chaos/chaos-run.js';
import type { ChaosProfile } from '../chaos/chaos-profiles.js';

/**
 * A short chaos run (tests/chaos/chaos-run.ts, the same harness and invariants as `npm run
 * test:chaos`) with every store behind a PgBouncer in transaction pooling mode, three server
 * connections for all of its workers' pools: workers SIGKILLed at random and at fault points,
 * their backends terminated, the server crashed once; then every effect is checked exactly once.
 * Half of the workers LISTEN over the server's own URL, the others (and the controller) poll.
 */
const PGBOUNCER_CHAOS: ChaosProfile = {
  runs: 200,
  workers: 4,
  concurrency: 3,
  // A chaos worker takes seconds to start on a loaded 2-core machine: a window much shorter than
  // this is over before the workers have done much under it.
  chaosMs: 60_000,
  serverRestarts: 1,
  kills: 15,
  backendTerminations: 15,
  tickMs: { min: 100, max: 400 },
  settleTimeoutMs: 240_000,
  localStartsPerWorker: 2,
  pgbouncer: { poolSize: 3 },
};

const seed = Number(process.env['LEDGERFLOW_CHAOS_SEED'] ?? randomInt(1, 1_000_000));

it(`keeps every effect exactly once behind PgBouncer (transaction pooling) through kills, backend terminations and a server crash (seed ${seed})`, async () => {
  const outcome = await runChaos({
    ...PGBOUNCER_CHAOS,
    seed,
    log: (line) => process.stderr.write(`[chaos/pgbouncer] ${line}\n`),
  });
  console.log(outcome.summary);
  const replay = `${outcome.summary}\nreplay with LEDGERFLOW_CHAOS_SEED=${seed}`;
  expect(outcome.report.violations, replay).toEqual([]);
  expect(outcome.fulfil.violations, replay).toEqual([]);
  expect(outcome.compensation.violations, replay).toEqual([]);
  expect(outcome.report.duplicates, replay).toBe(0);
  expect(outcome.fulfil.duplicates, replay).toBe(0);
  expect(outcome.compensation.duplicates, replay).toBe(0);
  expect(outcome.compensation.refunds, replay).toBe(outcome.compensation.chargedAndCompensated);
  expect(outcome.report.runs, replay).toBe(PGBOUNCER_CHAOS.runs);
  expect(outcome.report.completed, replay).toBe(PGBOUNCER_CHAOS.runs);
  expect(outcome.fulfil.completed, replay).toBe(outcome.fulfil.runs);
  expect(outcome.fulfil.consumed, replay).toBe(outcome.fulfil.runs);
  expect(outcome.maxPickingSlots, replay).toBeLessThanOrEqual(2);
  expect(outcome.unexpectedExits, replay).toEqual([]);
  // It did what it claims: runs finished under the chaos (the starts acknowledged completed were
  // made and driven while it went on), kills, terminations, the crash, all through PgBouncer.
  expect(outcome.localAcked, replay).toBeGreaterThan(0);
  expect(outcome.kills.total, replay).toBeGreaterThan(0);
  expect(outcome.backendTerminations, replay).toBeGreaterThan(0);
  expect(outcome.serverRestarts, replay).toBe(1);
  expect(outcome.pooledTransactions, replay).toBeGreaterThan(PGBOUNCER_CHAOS.runs * 5);
}, 600_000);
