import { expect } from 'vitest';
import type { FailoverOutcome } from './failover-run.js';

/**
 * What a failover with a synchronous standby must keep, whoever promotes it: every run of the
 * load completed, nothing acknowledged lost (starts, intents, recorded effects), no effect applied
 * twice, workers and client followed in place (LISTEN included), and the waits across it answered —
 * and it proves something only if the failover met acknowledged work.
 */
export function expectNothingLost(
  outcome: FailoverOutcome,
  load: { readonly runs: number; readonly workers: number },
): void {
  expect(outcome.report.violations, outcome.summary).toEqual([]);
  expect(outcome.report.duplicates, outcome.summary).toBe(0);
  expect(outcome.report.runs, outcome.summary).toBe(load.runs);
  expect(outcome.report.completed, outcome.summary).toBe(load.runs);
  expect(outcome.lostRuns, outcome.summary).toBe(0);
  expect(outcome.lostIntents, outcome.summary).toBe(0);
  expect(outcome.lostRecorded, outcome.summary).toBe(0);
  expect(outcome.duplicateEmails, outcome.summary).toBe(0);
  expect(outcome.duplicateCharges, outcome.summary).toBe(0);
  expect(outcome.unexpectedExits, outcome.summary).toEqual([]);
  expect(outcome.workerRestarts, outcome.summary).toBe(0);
  expect(outcome.listenersRestored, outcome.summary).toBeGreaterThanOrEqual(load.workers);
  expect(outcome.waits, outcome.summary).toEqual(outcome.waits.map(() => 'completed'));
  expect(outcome.waits.length, outcome.summary).toBeGreaterThan(0);
  expect(outcome.acksBeforeCut, outcome.summary).toBeGreaterThan(0);
  expect(outcome.startsAcked, outcome.summary).toBeGreaterThan(0);
  expect(outcome.recordedAcked, outcome.summary).toBeGreaterThan(0);
  expect(outcome.intentsAcked, outcome.summary).toBeGreaterThan(0);
}
