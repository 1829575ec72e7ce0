import type { Kysely } from 'kysely';
import { LeaseLostError } from '../errors.js';
import { faultPoint } from '../faults/fault-points.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import { loadLeasedRun, type LeasedRun } from './claim.js';
import { STEP_EXECUTORS } from './executors/executors.js';
import { commitKnowingOutcome, untilReachable, type StepExecution } from './executors/step-execution.js';
import type { WorkflowRegistry } from './registry.js';
import { commitFailure, type Continuation, type Lease } from './step-commits.js';
import { isConnectionError, ResyncNeeded, serializeError, StepFailure } from './step-errors.js';
import type { WorkerEvent } from './worker-events.js';

export interface DriverContext {
  readonly db: Kysely<LedgerflowDatabase>;
  readonly registry: WorkflowRegistry;
  readonly workerId: string;
  readonly leaseMs: number;
  /** While stopping, a step's commit gives the run back instead of holding it for the next step. */
  isStopping(): boolean;
  emit(event: WorkerEvent): void;
}

/**
 * Drives one claimed run step by step under its lease until it completes, fails, parks, is
 * rescheduled or released, or the lease is lost. Each step's commit opens the next step's
 * attempt under the same lease, so a run of N steps costs one claim and N step commits.
 *
 * Errors: a {@link StepFailure} (or any other error from a step) is a failed attempt, recorded
 * by `commitFailure`; a lost lease stops the drive with nothing committed; an unknown commit
 * outcome re-reads the run from the database and continues from wherever it actually is.
 */
export async function driveRun(ctx: DriverContext, claimed: LeasedRun, signal: AbortSignal): Promise<void> {
  let run: LeasedRun | undefined = claimed;
  let first = true;
  let resyncs = 0;
  while (run !== undefined) {
    if (resyncs > MAX_RESYNCS_WITHOUT_PROGRESS) {
      // The database keeps answering in a way this worker cannot act on; let the lease expire.
      ctx.emit({
        type: 'error',
        where: 'run',
        runId: run.id,
        error: serializeError(new Error(`gave up driving run ${run.id} after ${MAX_RESYNCS_WITHOUT_PROGRESS} re-reads without progress`)),
      });
      return;
    }
    const current: LeasedRun = run;
    const workflow = ctx.registry.get(current.workflowName, current.workflowVersion);
    const step = workflow?.steps[current.currentStep];
    if (workflow === undefined || step === undefined || current.attempt === null) {
      ctx.emit({
        type: 'error',
        where: 'run',
        runId: current.id,
        error: serializeError(
          new Error(
            `Run ${current.id} of ${current.workflowName} v${current.workflowVersion} is at step ${current.currentStep}, ` +
              'which this worker does not know; is the database migrated for this code?',
          ),
        ),
      });
      return;
    }
    const lease: Lease = { runId: current.id, fencingToken: current.fencingToken, workerId: ctx.workerId, leaseMs: ctx.leaseMs };
    const attempt = current.attempt;
    const execution: StepExecution = {
      db: ctx.db,
      lease,
      run: current,
      workflow,
      step,
      attempt,
      signal,
      continuation: (output: Json): Continuation => {
        const next = workflow.steps[step.position + 1];
        if (next === undefined) return { kind: 'complete', runOutput: { ...current.outputs, [step.name]: output } };
        return ctx.isStopping() ? { kind: 'release' } : { kind: 'hold', nextStep: next.name };
      },
      onUnknownOutcome: (error) =>
        ctx.emit({ type: 'commit-outcome-unknown', runId: current.id, step: step.name, error: serializeError(error) }),
    };
    run = undefined;
    try {
      if (signal.aborted) throw signal.reason instanceof LeaseLostError ? signal.reason : new LeaseLostError(String(signal.reason));
      if (first) {
        first = false;
        await faultPoint('after-claim');
      }
      const outcome = await STEP_EXECUTORS[step.kind](execution);
      resyncs = 0;
      switch (outcome.kind) {
        case 'advanced':
          ctx.emit({ type: 'step-succeeded', runId: current.id, step: step.name, kind: step.kind, attempt, reused: outcome.reused === true });
          if (outcome.continuation === 'complete') {
            ctx.emit({ type: 'run-completed', runId: current.id, workflow: current.workflowName });
          } else if (outcome.continuation === 'release') {
            ctx.emit({ type: 'run-released', runId: current.id, step: step.name });
          } else if (outcome.nextAttempt !== null) {
            run = {
              ...current,
              currentStep: current.currentStep + 1,
              attempt: outcome.nextAttempt,
              priorFailures: 0,
              outputs: { ...current.outputs, [step.name]: outcome.output },
            };
          }
          break;
        case 'parked':
          ctx.emit({ type: 'run-parked', runId: current.id, step: step.name, reason: outcome.reason });
          break;
        case 'rescheduled':
          ctx.emit({ type: 'run-rescheduled', runId: current.id, step: step.name, until: outcome.until, reason: outcome.reason });
          break;
      }
    } catch (error) {
      run = await recover(ctx, execution, error);
      resyncs += 1;
    }
  }
}

const MAX_RESYNCS_WITHOUT_PROGRESS = 5;

/** Decides what an error during a step means; returns the run to continue with, if any. */
async function recover(ctx: DriverContext, s: StepExecution, error: unknown): Promise<LeasedRun | undefined> {
  const { lease, step } = s;
  if (error instanceof LeaseLostError) {
    ctx.emit({ type: 'lease-lost', runId: lease.runId, fencingToken: lease.fencingToken, step: step.name });
    return undefined;
  }
  if (error instanceof ResyncNeeded || isConnectionError(error)) {
    try {
      const fresh = await untilReachable(s, () => loadLeasedRun(ctx.db, lease.runId, lease.fencingToken));
      if (fresh === undefined) ctx.emit({ type: 'lease-lost', runId: lease.runId, fencingToken: lease.fencingToken, step: step.name });
      return fresh;
    } catch (readError) {
      ctx.emit({ type: 'error', where: 'run', runId: lease.runId, error: serializeError(readError) });
      return undefined;
    }
  }
  const failure = error instanceof StepFailure ? error : new StepFailure(error);
  try {
    const workflow = s.workflow;
    const outcome = await commitKnowingOutcome(
      s,
      () => commitFailure(ctx.db, { lease, step, attempt: s.attempt, failure, canReconcile: workflow.reconciler(step.name) !== undefined }),
      { retry: true },
    );
    ctx.emit({ type: 'step-failed', runId: lease.runId, step: step.name, attempt: s.attempt, error: serializeError(failure.cause), outcome });
    if (outcome.kind === 'parked') ctx.emit({ type: 'run-parked', runId: lease.runId, step: step.name, reason: outcome.reason });
    return undefined;
  } catch (commitError) {
    if (commitError instanceof LeaseLostError) {
      ctx.emit({ type: 'lease-lost', runId: lease.runId, fencingToken: lease.fencingToken, step: step.name });
      return undefined;
    }
    // Retried commits raise this only once the failure is known to be committed.
    if (commitError instanceof ResyncNeeded) return undefined;
    // The failure could not be recorded; the lease expires and the next claim retries the step.
    ctx.emit({ type: 'error', where: 'run', runId: lease.runId, error: serializeError(commitError) });
    return undefined;
  }
}
