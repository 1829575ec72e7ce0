/**
 * Every name ledgerflow's telemetry uses — span attributes, metric names and their attributes,
 * span names — defined once. The JSON log lines of `ledgerflow worker --log-format json` carry the
 * same attribute names ({@link eventAttributes}), so a log line and a span of the same step can be
 * joined on them.
 */

import type { WorkerEvent } from '../worker/worker-events.js';
import type { OtelAttributes } from './otel-api.js';

/** The instrumentation scope of every tracer and meter ledgerflow asks for. */
export const INSTRUMENTATION_SCOPE = 'ledgerflow';

export const ATTR = {
  runId: 'ledgerflow.run.id',
  workflow: 'ledgerflow.workflow.name',
  workflowVersion: 'ledgerflow.workflow.version',
  fencingToken: 'ledgerflow.run.fencing_token',
  /** How the flight ended: completed, released, parked, waiting, rescheduled, lease-lost, … */
  runOutcome: 'ledgerflow.run.outcome',
  /** The claim took the run over from an attempt whose worker stopped renewing its lease. */
  tookOver: 'ledgerflow.run.took_over',
  step: 'ledgerflow.step.name',
  stepKind: 'ledgerflow.step.kind',
  attempt: 'ledgerflow.step.attempt',
  /** How the attempt ended (the `outcome` of {@link METRIC.stepAttempts}). */
  stepOutcome: 'ledgerflow.step.outcome',
  idempotencyKey: 'ledgerflow.step.idempotency_key',
  /** Where a failed attempt failed: before-perform, perform, after-perform, other. */
  failurePhase: 'ledgerflow.step.failure_phase',
  workerId: 'ledgerflow.worker.id',
  /** The attempt that wrote the intent a reconcile looks up. */
  intentAttempt: 'ledgerflow.intent.attempt',
  /** found, not_found, unknown, or error (the lookup threw or returned something else). */
  reconcileOutcome: 'ledgerflow.reconcile.outcome',
  /** Who looked the intent up: the worker's next attempt (`attempt`) or a reconcile pass (`pass`). */
  reconcileBy: 'ledgerflow.reconcile.by',
  queue: 'ledgerflow.queue.name',
  /** Crash counters: `abandoned` (a claim closed a crashed attempt) or `repeated` (the step crashed its worker again). */
  crashKind: 'ledgerflow.crash.kind',
} as const;

export const SPAN = {
  run: (workflow: string) => `ledgerflow.run ${workflow}`,
  step: (step: string) => `ledgerflow.step ${step}`,
  perform: (step: string) => `ledgerflow.perform ${step}`,
  reconcile: (step: string) => `ledgerflow.reconcile ${step}`,
} as const;

export const METRIC = {
  /** Counter: step attempts that ended, by workflow, step, kind and outcome. */
  stepAttempts: 'ledgerflow.step.attempts',
  /** Histogram (ms): how long an attempt took, from the driver picking it up to its end. */
  stepDuration: 'ledgerflow.step.duration',
  /** Counter: crashed attempts (a claim abandoned an attempt under an expired lease; a step that crashed its worker again). */
  crashes: 'ledgerflow.step.crashes',
  /** Counter: leases this worker lost while it drove the run. */
  leaseLosses: 'ledgerflow.lease.losses',
  /** Counter: reconcile lookups, by outcome. */
  reconciliations: 'ledgerflow.reconciliations',
  /** Gauge: runs waiting for a slot, per queue. */
  queueDepth: 'ledgerflow.queue.depth',
  /** Gauge: open intents (external calls whose outcome is not recorded yet). */
  openIntents: 'ledgerflow.intents.open',
  /** Gauge (s): age of the oldest open intent. */
  oldestIntentAge: 'ledgerflow.intents.oldest_age',
} as const;

/**
 * The attributes of a worker event under the span attribute names, for structured logs. Fields
 * that have no span attribute keep their event name (`error`, `outcome`, `reason`, …).
 */
export function eventAttributes(event: WorkerEvent): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(event)) {
    if (field === 'type' || value === undefined) continue;
    const name = EVENT_FIELD_ATTRIBUTES[field];
    if (name !== undefined) out[name] = value;
    else out[field] = value;
  }
  if (event.type === 'run-claimed' || event.type === 'run-completed') {
    // `workflow` is `name@version` in run-claimed: split, as on spans.
    const [name, version] = splitWorkflow(event.workflow);
    out[ATTR.workflow] = name;
    if (version !== undefined) out[ATTR.workflowVersion] = version;
  }
  if (event.type === 'step-failed') out[ATTR.failurePhase] = event.phase;
  return out;
}

const EVENT_FIELD_ATTRIBUTES: Readonly<Record<string, string>> = {
  runId: ATTR.runId,
  fencingToken: ATTR.fencingToken,
  step: ATTR.step,
  kind: ATTR.stepKind,
  attempt: ATTR.attempt,
  workerId: ATTR.workerId,
  phase: ATTR.failurePhase,
  tookOver: ATTR.tookOver,
};

function splitWorkflow(workflow: string): [string, number | undefined] {
  const at = workflow.lastIndexOf('@');
  if (at <= 0) return [workflow, undefined];
  const version = Number(workflow.slice(at + 1));
  return Number.isInteger(version) ? [workflow.slice(0, at), version] : [workflow, undefined];
}

/** Span attributes of a run as a claim holds it. */
export function runAttributes(run: {
  readonly id: string;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly fencingToken: number;
}): OtelAttributes {
  return {
    [ATTR.runId]: run.id,
    [ATTR.workflow]: run.workflowName,
    [ATTR.workflowVersion]: run.workflowVersion,
    [ATTR.fencingToken]: run.fencingToken,
  };
}
