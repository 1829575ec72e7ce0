/*
 * `ledgerflow/testing`: what tests need and production code does not.
 *
 * - A kit for testing your own workflows fast and deterministically, in process:
 *   `createTestEnvironment` (embedded PGlite, a worker that runs until idle, a clock the test
 *   moves, in-process crashes at fault points) and ledger assertions (`assertLedger`,
 *   `expectEachKeyOnce`). See docs/testing.md and docs/crash-recipes.md.
 * - The named fault points the runtime passes through (inert unless configured here or through the
 *   LEDGERFLOW_FAULTS environment variable of a worker process), to make a worker throw, hang or
 *   die with SIGKILL exactly where a crash window is.
 */
import '../dsl/check-peer-dependencies.js';
export {
  configureFaults,
  faultCounts,
  faultPoint,
  onFaultFired,
  parseFaultLogLine,
  FAULT_LOG_PREFIX,
  FAULT_POINTS,
  FAULTS_ENV,
  InjectedFaultError,
  type FaultAction,
  type FaultFiring,
  type FaultPointName,
  type FaultPointSpec,
  type FaultSpec,
} from './faults/fault-points.js';
export {
  createTestEnvironment,
  type IdleReport,
  type TestEnvironment,
  type TestEnvironmentOptions,
  type TouchedRun,
} from './testing/test-environment.js';
export { assertLedger, expectEachKeyOnce, type LedgerExpectation } from './testing/ledger-assertions.js';
export { WorkerCrashedError } from './testing/crashable-store.js';
export { CLOCK_SCHEMA } from './testing/test-clock.js';
