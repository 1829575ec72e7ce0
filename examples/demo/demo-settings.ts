/**
 * Worker timings for the demo. Production leases are tens of seconds; the demo shortens them so
 * that a killed worker's runs are taken over (and its open intents reconciled) within a few
 * seconds instead of a minute. Correctness does not depend on these values, only latency.
 */
export const DEMO_WORKER_SETTINGS = {
  leaseMs: 3_000,
  pollIntervalMs: 50,
  reconcileIntervalMs: 250,
} as const;
