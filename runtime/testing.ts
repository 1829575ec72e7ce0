/*
 * `ledgerflow/testing`: what tests and chaos runs need and production code does not — the named
 * fault points the runtime passes through (inert unless configured here or through the
 * LEDGERFLOW_FAULTS environment variable of a worker process), to make a worker throw, hang or
 * die with SIGKILL exactly where a crash window is.
 */
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
