/**
 * Structured logs of a worker: its events as JSON lines (`ledgerflow worker --log-format json`,
 * or {@link jsonEventLogger} as a worker's `onEvent`). One object per line:
 *
 *   {"time":"2026-…Z","level":"info","event":"step-succeeded","message":"step charge succeeded (attempt 1)",
 *    "ledgerflow.run.id":"…","ledgerflow.step.name":"charge","ledgerflow.step.kind":"external",
 *    "ledgerflow.step.attempt":1,"reused":false}
 *
 * `time` is when the line was written, `level` one of info, warn, error, `event` the event's
 * type, `message` a sentence for people; the rest are the event's fields under the span
 * attribute names (`attributes.ts`), so logs and traces join on them.
 */

import type { WorkerEvent } from '../worker/worker-events.js';
import { eventAttributes } from './attributes.js';

export type LogLevel = 'info' | 'warn' | 'error';

type EventOf<T extends WorkerEvent['type']> = Extract<WorkerEvent, { type: T }>;

/** Per event type: its level and its message (a new event type without one does not compile). */
const DESCRIBE: { readonly [T in WorkerEvent['type']]: readonly [LogLevel, (event: EventOf<T>) => string] } = {
  'worker-started': ['info', (e) => `worker ${e.workerId} started for ${e.workflows.join(', ')}`],
  'versions-unserved': ['warn', (e) => `no worker here serves unfinished runs of ${e.versions.join(', ')}`],
  'worker-stopped': ['info', (e) => `worker ${e.workerId} stopped (${e.released} run(s) released)`],
  'run-claimed': [
    'info',
    (e) =>
      `claimed run ${e.runId} of ${e.workflow}${e.step !== null ? ` at step ${e.step}` : ''}${e.tookOver ? ' (took over a crashed attempt)' : ''}`,
  ],
  'step-succeeded': [
    'info',
    (e) => `step ${e.step} ${e.reused ? 'reused its recorded effect' : 'succeeded'} (attempt ${e.attempt})`,
  ],
  'step-failed': [
    'warn',
    (e) => `step ${e.step} failed (attempt ${e.attempt}, ${e.phase}): ${e.error.message}; ${e.outcome.kind}`,
  ],
  'step-crashed': ['warn', (e) => `step ${e.step} crashed its worker ${e.crashes} time(s); ${e.outcome.kind}`],
  'run-adopted': ['info', (e) => `adopted run ${e.runId} (a claim whose commit outcome was unknown took it)`],
  'run-completed': ['info', (e) => `run ${e.runId} of ${e.workflow} completed`],
  'run-compensating': [
    'warn',
    (e) => `run ${e.runId} failed for good at step ${e.step}; compensating its recorded effects`,
  ],
  'run-compensated': ['info', (e) => `run ${e.runId} of ${e.workflow} compensated`],
  'run-released': ['info', (e) => `run ${e.runId} released before step ${e.step}`],
  'run-parked': ['warn', (e) => `run ${e.runId} parked at step ${e.step}: ${e.reason}`],
  'step-skipped': ['info', (e) => `step ${e.step} skipped (its condition said no)`],
  'run-waiting': ['info', (e) => `run ${e.runId} waiting at step ${e.step}`],
  'run-deadline-exceeded': ['warn', (e) => `run ${e.runId} cancelled: its deadline passed`],
  'run-rescheduled': [
    'info',
    (e) => `run ${e.runId} rescheduled at step ${e.step} until ${e.until.toISOString()}: ${e.reason}`,
  ],
  'lease-lost': ['warn', (e) => `lost the lease of run ${e.runId} (fencing token ${e.fencingToken})`],
  'commit-outcome-unknown': [
    'warn',
    (e) => `the commit of step ${e.step} may or may not have happened: ${e.error.message}`,
  ],
  'reconcile-pass': [
    'info',
    (e) => `reconcile pass: ${e.report.recorded} recorded, ${e.report.released} released, ${e.report.parked} parked`,
  ],
  'prune-pass': [
    'info',
    (e) =>
      `prune pass: ${e.report.runsPruned} run(s) pruned, ${e.report.effectsArchived} effect(s) archived` +
      (e.report.eventsPruned > 0 ? `, ${e.report.eventsPruned} event(s) pruned` : '') +
      ` in ${e.report.batches} batch(es)`,
  ],
  'listener-lost': ['warn', (e) => `LISTEN subscription lost: ${e.error.message}`],
  'listener-restored': ['info', (e) => `LISTEN subscription restored after ${e.failedAttempts} failed attempt(s)`],
  'schedule-ticked': ['info', (e) => `schedule ${e.schedule} started ${e.runIds.length} run(s)`],
  'schedule-failed': [
    'error',
    (e) => `schedule ${e.schedule} could not start the run of tick ${e.tick}: ${e.error.message}`,
  ],
  error: ['error', (e) => `${e.where}: ${e.error.message}`],
};

function describe<T extends WorkerEvent['type']>(event: EventOf<T>): readonly [LogLevel, string] {
  const [level, message] = DESCRIBE[event.type as T];
  return [level, message(event)];
}

/** The JSON log line of an event (without the newline). */
export function formatEventJson(event: WorkerEvent, time: Date = new Date()): string {
  const [level, message] = describe(event);
  return JSON.stringify({ time: time.toISOString(), level, event: event.type, message, ...eventAttributes(event) });
}

/**
 * An `onEvent` for `createWorker` that writes each event as one JSON line.
 *
 * @example
 * const worker = createWorker({ store, workflows, onEvent: jsonEventLogger((line) => process.stdout.write(line)) });
 */
export function jsonEventLogger(write: (line: string) => void): (event: WorkerEvent) => void {
  return (event) => write(`${formatEventJson(event)}\n`);
}
