/**
 * The NOTIFY channels of the core schema. Here, below the client and the worker, because both
 * sides send on them and listen to them: a start, a cancel, a sent event and the worker's own
 * commits wake idle workers on {@link RUNS_CHANNEL}; the settle of a watched run (a trigger,
 * core 0011) wakes the client's waits on {@link RUN_SETTLED_CHANNEL}.
 */

/** The channel `start()` NOTIFYs on (once per new run, never per step) to wake idle workers. */
export const RUNS_CHANNEL = 'ledgerflow_runs';

/** The channel a watched run's settling transaction NOTIFYs, with the run id as payload (core 0011). */
export const RUN_SETTLED_CHANNEL = 'ledgerflow_run_settled';
