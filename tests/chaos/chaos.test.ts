import { randomInt } from 'node:crypto';
import { expect, it } from 'vitest';
import { CI_CHAOS, CI_CHAOS_MINIMUMS, TEST_SOAK_CHAOS } from './chaos-profiles.js';
import { runChaos } from './chaos-run.js';

/**
 * The chaos suite: CI_CHAOS (chaos-profiles.ts) on every `.ci/run`, asserting that it did at
 * least CI_CHAOS_MINIMUMS; LEDGERFLOW_SOAK=1 makes it a longer soak. LEDGERFLOW_CHAOS_SEED
 * replays a run's decisions (which worker is killed, which backend terminated, when the server
 * crashes, which fault points fire). The 10 000-run soak is `npm run soak` (bench/soak/main.ts).
 */
const soak = process.env['LEDGERFLOW_SOAK'] === '1';
const seed = Number(process.env['LEDGERFLOW_CHAOS_SEED'] ?? randomInt(1, 1_000_000));
const profile = soak ? TEST_SOAK_CHAOS : CI_CHAOS;

it(
  `keeps every effect exactly once, and every child, event and sleep whole, through kills, backend terminations, a server crash and late provider applications (seed ${seed})`,
  async () => {
    const outcome = await runChaos({ ...profile, seed, log: (line) => process.stderr.write(`[chaos] ${line}\n`) });
    console.log(outcome.summary);
    const replay = `replay with LEDGERFLOW_CHAOS_SEED=${seed}`;
    expect(outcome.report.violations, `${outcome.summary}\n${replay}`).toEqual([]);
    expect(outcome.fulfil.violations, `${outcome.summary}\n${replay}`).toEqual([]);
    expect(outcome.compensation.violations, `${outcome.summary}\n${replay}`).toEqual([]);
    expect(outcome.report.duplicates, replay).toBe(0);
    expect(outcome.fulfil.duplicates, replay).toBe(0);
    // Runs that failed after charging compensated (refunds = their charges, exactly once each).
    expect(outcome.compensation.duplicates, replay).toBe(0);
    expect(outcome.compensation.compensated, replay).toBeGreaterThan(0);
    expect(outcome.compensation.refunds, replay).toBe(outcome.compensation.chargedAndCompensated);
    expect(outcome.compensation.cancelled, replay).toBeGreaterThan(0);
    // Waiting, branching and fanned-out runs took part: all finished, every event taken once.
    expect(outcome.fulfil.completed, replay).toBe(outcome.fulfil.runs);
    expect(outcome.fulfil.runs, replay).toBe(Math.floor(profile.runs / 4));
    expect(outcome.fulfil.consumed, replay).toBe(outcome.fulfil.runs);
    expect(outcome.eventsSent, replay).toBeGreaterThan(outcome.fulfil.events);
    // Consumed events were pruned while resends of them still arrived (each stored once, live or as its tombstone).
    expect(outcome.fulfil.pruned, replay).toBeGreaterThan(0);
    // The picking queue's limit held across all workers, through the kills and the restart.
    expect(outcome.maxPickingSlots, replay).toBeLessThanOrEqual(2);
    expect(outcome.maxPickingSlots, replay).toBeGreaterThan(0);
    expect(outcome.report.runs, replay).toBe(profile.runs);
    // Runs the workers started for themselves (their inserts on their first commits) took part.
    expect(outcome.localAcked, `${outcome.summary}\n${replay}`).toBeGreaterThan(0);
    expect(outcome.report.completed, replay).toBe(profile.runs);
    expect(outcome.unexpectedExits, `workers died without being killed; ${replay}`).toEqual([]);
    // The run must have exercised what it claims to: otherwise it proves nothing.
    const { kills, backendTerminations, serverRestarts } = outcome;
    expect(outcome.report.runs, `${outcome.summary}\n${replay}`).toBeGreaterThanOrEqual(CI_CHAOS_MINIMUMS.runs);
    expect(kills.total, `${outcome.summary}\n${replay}`).toBeGreaterThanOrEqual(CI_CHAOS_MINIMUMS.kills);
    expect(backendTerminations, `${outcome.summary}\n${replay}`).toBeGreaterThanOrEqual(
      CI_CHAOS_MINIMUMS.backendTerminations,
    );
    expect(serverRestarts, replay).toBeGreaterThanOrEqual(CI_CHAOS_MINIMUMS.serverRestarts);
    expect(outcome.fleet.killedByController, replay).toBeGreaterThan(0);
    expect(outcome.fleet.killedByControllerAtFaultPoint + outcome.fleet.killedAtFaultPoint, replay).toBeGreaterThan(0);
    // Receipts whose client timed out while the provider applied them later.
    expect(outcome.report.clientTimeouts, replay).toBeGreaterThan(0);
    expect(outcome.report.lateApplied, replay).toBeGreaterThan(0);
  },
  soak ? 1_800_000 : 900_000,
);
