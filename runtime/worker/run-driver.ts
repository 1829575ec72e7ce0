/*
 * The run driver: one claimed run, step after step, under one lease ({@link driveRun}). A drive
 * ends when the run completes, fails, parks, is rescheduled or released, or its lease is lost;
 * what it carries between steps (plain steps' results not yet committed) is carried-prefix.ts's.
 *
 * Long because the step loop (`driveSteps`) is one machine over one lease — the carry, the
 * resyncs, the run's queue slot and its deadline are its local state — and the functions below it
 * are its branches (deadline, crash, flush, intent ahead, recovery), used nowhere else.
 */
import { commitPlainResult, insertStart } from './executors/start-insert.js';
import { exponentialBackoffMs, sleep } from '../backoff.js';
import type { PayloadLimitsCache } from '../limits/limits-cache.js';
import type { Kysely } from 'kysely';
import type { StepDefinition } from '../../dsl/workflow.js';
import { LeaseLostError } from '../errors.js';
import { faultPoint } from '../faults/fault-points.js';
import { toStoredJson, withStoredOutput } from '../store/stored-json.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import { NO_RUN_TRACE, type RunTrace, type Telemetry } from '../telemetry/telemetry.js';
import { loadLeasedRun } from './commit-outcome.js';
import type { LeasedRun } from '../store/leased-run.js';
import { STEP_EXECUTORS } from './executors/executors.js';
import {
  claimAhead,
  commitKnowingOutcome,
  commitSkipped,
  lostLease,
  stepWanted,
  untilReachable,
  type OpenedIntentEarlier,
  type StepExecution,
  type StepOutcome,
} from './executors/step-execution.js';
import { runStepHandler } from './executors/step-executor.js';
import { CarriedPastDeadline, carryIsFull, flushCarry, type Carry, type CarriedStep } from './carried-prefix.js';
import type { CommitQueue } from './commit-queue.js';
import { awaitQueueSlots } from './queue-slots.js';
import { cancelOverdue } from './wait-commits.js';
import {
  compensationOf,
  compensationStart,
  nextStepOf,
  type RegisteredWorkflow,
  type WorkflowRegistry,
} from './registry.js';
import { compensateOverdue, executeCompensation } from './compensation.js';
import { leaseLost, releaseLeases, type Lease } from './lease.js';
import { commitFailure, failureRecord, type FailureParams } from './failure-commits.js';
import { commitCrash } from './crash-commits.js';
import type { LocalWaiters } from '../client/local-waiters.js';
import type { FlightAbort } from './flight.js';
import type { Continuation, FusedClaim, NextIntent } from './result-commit.js';
import { isResourceRefusal, ResyncNeeded, serializeError, StepFailure } from './step-errors.js';
import { isConnectionError } from '../store/connection-errors.js';
import type { WorkerEvent } from './worker-events.js';
import type { SettledRun } from '../client/run-details.js';

export interface DriverContext {
  readonly db: Kysely<LedgerflowDatabase>;
  /** Ends a stuck session (PostgreSQL); see `Store.terminateBackend`. */
  readonly terminateBackend: ((pid: number) => Promise<void>) | undefined;
  /** The store's connections pipeline (`Store.pipelines`). */
  readonly pipelines: boolean;
  readonly registry: WorkflowRegistry;
  readonly workerId: string;
  readonly leaseMs: number;
  /** How many children a `child`/`forEach` step starts per commit. */
  readonly childrenPerCommit: number;
  /** The worker's result commits, grouped across its flights (group commit). */
  readonly commits: CommitQueue;
  /** While stopping, a step's commit gives the run back instead of holding it for the next step. */
  isStopping(): boolean;
  /**
   * The claim a run's completion commit should also make, if any. Every claim it returns is
   * answered with exactly one {@link DriverContext.adopt} call, whatever the commit's fate.
   */
  claimNext(): FusedClaim | undefined;
  /** Hands the worker the runs a fused claim took; `undefined` when its commit failed. */
  adopt(runs: readonly LeasedRun[] | undefined): void;
  emit(event: WorkerEvent): void;
  /** Spans and metrics (`NO_TELEMETRY` when OpenTelemetry is not available). */
  readonly telemetry: Telemetry;
  /** The database's payload limits (`ledgerflow limits`), primed when the worker started. */
  readonly limits: PayloadLimitsCache;
  /** Waits of this process for the runs it settles, answered from what the settling commit wrote. */
  readonly waiters: LocalWaiters;
}

/**
 * Drives one claimed run step by step under its lease until it completes, fails, parks, is
 * rescheduled or released, or the lease is lost. Each commit opens the next step's attempt under
 * the same lease. A plain step's result is carried to the run's next commit instead of being
 * committed alone (carried-prefix.ts), so a run costs one claim and one commit per effect
 * boundary — an effect step, a wait, a queue ask, the completion — not one per step; while there
 * is a backlog, the completion also claims the next run (see `FusedClaim`).
 *
 * Errors: a {@link StepFailure} (or any other error from a step) is a failed attempt, recorded
 * by `commitFailure`; a lost lease stops the drive with nothing committed; an unknown commit
 * outcome re-reads the run from the database and continues from wherever it actually is.
 *
 * Traced (telemetry enabled), the flight is a run span whose step spans the driver starts and
 * the flight's own events end (`RunTrace.observe`); untraced, nothing of that is allocated.
 */
export async function driveRun(ctx: DriverContext, claimed: LeasedRun, signal: FlightAbort): Promise<void> {
  if (!ctx.telemetry.enabled) return driveSteps(ctx, claimed, signal, NO_RUN_TRACE);
  const trace = ctx.telemetry.runStarted(claimed, ctx.workerId);
  const traced: DriverContext = {
    ...ctx,
    emit: (event) => {
      trace.observe(event);
      ctx.emit(event);
    },
  };
  try {
    await trace.within(() => driveSteps(traced, claimed, signal, trace));
  } catch (error) {
    trace.failed(error);
    throw error;
  } finally {
    trace.end();
  }
}

async function driveSteps(
  ctx: DriverContext,
  claimed: LeasedRun,
  signal: FlightAbort,
  runTrace: RunTrace,
): Promise<void> {
  let run: LeasedRun | undefined = claimed;
  let first = true;
  let resyncs = 0;
  // The run's workflow-level queue slot, once this flight holds it: kept until the run settles.
  let runSlotHeld = false;
  // Plain steps run since the last commit, their results not durable yet (carried-prefix.ts).
  let carried: CarriedStep[] = [];
  // A flight that took the run over from a crash commits every step, so that a step that kills its
  // worker is the one whose attempt records the crash, not the first step of a carried prefix.
  const carrying = !claimed.tookOver && claimed.crashes === 0;
  // The intent the last commit wrote for the step the run moved to (NextIntent), if it did.
  let intentOpened: OpenedIntentEarlier | undefined;
  while (run !== undefined) {
    if (resyncs > MAX_RESYNCS_WITHOUT_PROGRESS) {
      // The database keeps answering in a way this worker cannot act on; let the lease expire.
      ctx.emit({
        type: 'error',
        where: 'run',
        runId: run.id,
        error: serializeError(
          new Error(`gave up driving run ${run.id} after ${MAX_RESYNCS_WITHOUT_PROGRESS} re-reads without progress`),
        ),
      });
      return;
    }
    const current: LeasedRun = run;
    const workflow = ctx.registry.get(current.workflowName, current.workflowVersion);
    const step = workflow?.steps[current.currentStep];
    if (current.repeatedCrash && workflow !== undefined && step !== undefined) {
      await settleCrash(ctx, current, workflow, step);
      return;
    }
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
    const lease: Lease = {
      runId: current.id,
      fencingToken: current.fencingToken,
      workerId: ctx.workerId,
      leaseMs: ctx.leaseMs,
    };
    const attempt = current.attempt;
    // Cached; once primed it never throws (a failed re-read keeps the last limits read).
    const limits = await ctx.limits.current();
    const trace = runTrace.stepStarted(step, attempt);
    const stepStartedAt = performance.now();
    const [firstCarried, ...moreCarried] = carried;
    const carry: Carry | undefined =
      firstCarried === undefined
        ? undefined
        : { steps: [firstCarried, ...moreCarried], stepStartedAt, written: false, reported: false };
    // A fused claim asked for by this step's completion; answered with adopt() exactly once.
    let fused: FusedClaim | undefined;
    // The next step's intent, if this step's commit is to write it (NextIntent), and when that commit was built.
    let nextIntent: { readonly intent: NextIntent; readonly committingAt: number } | undefined;
    const earlier = intentOpened?.claim.attempt === current.attempt ? intentOpened : undefined;
    intentOpened = undefined;
    // The run's output as the completion commit writes it (stored form): a local wait's answer.
    let runOutput: Json | undefined;
    const execution: StepExecution = {
      db: ctx.db,
      lease,
      run: current,
      workflow,
      step,
      attempt,
      signal,
      childrenPerCommit: ctx.childrenPerCommit,
      limits,
      commits: ctx.commits,
      trace,
      continuation: (output: Json | undefined): Continuation => {
        const next = nextStepOf(workflow, step);
        if (next === undefined) {
          fused ??= ctx.claimNext();
          runOutput = output === undefined ? current.outputs : withStoredOutput(current.outputs, step.name, output);
          return {
            kind: 'complete',
            runOutput,
            ...(fused ? { claimNext: fused } : {}),
            ...(step.compensates !== undefined ? { compensated: true } : {}),
          };
        }
        if (ctx.isStopping()) return { kind: 'release' };
        const intent = opensIntentAhead(workflow, step, next, runSlotHeld)
          ? intentAhead(next, current, step, output, ctx.leaseMs)
          : undefined;
        nextIntent = intent === undefined ? undefined : { intent, committingAt: performance.now() };
        return intent === undefined
          ? { kind: 'hold', nextStep: next.name }
          : { kind: 'hold', nextStep: next.name, intent };
      },
      onUnknownOutcome: (error) =>
        ctx.emit({ type: 'commit-outcome-unknown', runId: current.id, step: step.name, error: serializeError(error) }),
      ...(ctx.terminateBackend !== undefined ? { terminateBackend: ctx.terminateBackend } : {}),
      pipelines: ctx.pipelines,
      carry,
      intentOpened: earlier,
    };
    // Whether this step's result may wait in memory for a later commit (see carried-prefix.ts).
    const mayCarry = (kind: 'output' | 'skipped'): boolean =>
      carrying &&
      step.compensates === undefined &&
      (kind === 'skipped' || (step.kind === 'step' && !asksForSlot(workflow, step, runSlotHeld))) &&
      nextStepOf(workflow, step) !== undefined &&
      !ctx.isStopping() &&
      !signal.aborted &&
      !carryIsFull(carried, performance.now());
    const carryOn = (output: Json | undefined): void => {
      carried.push({ step, attempt, output, startedAt: stepStartedAt, finishedAt: performance.now() });
      runTrace.stepCarried();
      run = {
        ...current,
        currentStep: current.currentStep + 1,
        // The next step was never reached (a run only moves forward): it has no attempt yet.
        attempt: 1,
        priorFailures: 0,
        crashes: 0,
        repeatedCrash: false,
        tookOver: false,
        outputs: output === undefined ? current.outputs : withStoredOutput(current.outputs, step.name, output),
        overdue: false,
      };
    };
    run = undefined;
    try {
      if (signal.aborted) throw lostLease(signal);
      if (first) {
        first = false;
        await faultPoint('after-claim');
      }
      // A run being compensated may be past its deadline (that may be why): it compensates regardless.
      if (current.overdue && step.compensates === undefined) {
        await cancelAtDeadline(ctx, execution);
        return;
      }
      let result: StepOutcome | undefined;
      try {
        if (step.compensates !== undefined) {
          if ((await flushBefore(ctx, execution)) === 'overdue') return;
          // Compensations hold no queue slot: undoing must not wait behind new work.
          result = await trace.within(executeCompensation, execution);
        } else if (!stepWanted(execution)) {
          if (mayCarry('skipped')) {
            carryOn(undefined);
            continue;
          }
          await insertStart(execution);
          result = await commitSkipped(execution);
        } else if (step.kind === 'step' && !asksForSlot(workflow, step, runSlotHeld)) {
          const output = await trace.within(runStepHandler, execution);
          if (mayCarry('output')) {
            carryOn(output);
            continue;
          }
          result = await commitKnowingOutcome(execution, () => commitPlainResult(execution, output), { retry: true });
        } else {
          // A transactional step writes the carry in its own transaction; anything else commits it first.
          if (step.kind !== 'transactional' || asksForSlot(workflow, step, runSlotHeld)) {
            if ((await flushBefore(ctx, execution)) === 'overdue') return;
          }
          result = await awaitQueueSlots(execution, runSlotHeld);
          runSlotHeld ||= result === undefined && workflow.registration.workflow.queue !== undefined;
          result ??= await trace.within(STEP_EXECUTORS[step.kind], execution);
        }
      } finally {
        // The worker holds its claim open until it hears back, whatever became of the commit.
        if (fused !== undefined) ctx.adopt(result?.kind === 'advanced' ? result.claimed : undefined);
      }
      const outcome = result;
      resyncs = 0;
      if (carry !== undefined) {
        if (!carry.written)
          throw new Error(
            `internal: step "${step.name}" of run ${current.id} ended without writing the steps carried before it`,
          );
        reportCarried(ctx, current.id, carry);
      }
      carried = [];
      switch (outcome.kind) {
        case 'advanced':
          if (outcome.skipped === true) ctx.emit({ type: 'step-skipped', runId: current.id, step: step.name });
          else
            ctx.emit({
              type: 'step-succeeded',
              runId: current.id,
              step: step.name,
              kind: step.kind,
              attempt,
              reused: outcome.reused === true,
            });
          if (outcome.continuation === 'complete' && step.compensates !== undefined) {
            ctx.emit({ type: 'run-compensated', runId: current.id, workflow: current.workflowName });
          } else if (outcome.continuation === 'complete') {
            // The completion commit cleared the error and wrote this output (step-commits.ts).
            if (ctx.waiters.watches(current.id))
              ctx.waiters.settled(settledRun(current, 'completed', runOutput ?? current.outputs, null));
            ctx.emit({ type: 'run-completed', runId: current.id, workflow: current.workflowName });
          } else if (outcome.continuation === 'release') {
            ctx.emit({ type: 'run-released', runId: current.id, step: step.name });
          } else if (outcome.nextAttempt !== null) {
            run = {
              ...current,
              currentStep: current.currentStep + 1,
              attempt: outcome.nextAttempt,
              priorFailures: 0,
              crashes: 0,
              repeatedCrash: false,
              tookOver: false,
              // In the order a claim reads them back (jsonb_object_agg), as the output itself is.
              outputs:
                outcome.skipped === true
                  ? current.outputs
                  : withStoredOutput(current.outputs, step.name, outcome.output),
              overdue: outcome.overdue === true && step.compensates === undefined,
            };
            if (nextIntent?.intent.opened === true) {
              const { key, requestHash } = nextIntent.intent;
              intentOpened = {
                claim: { key, requestHash, attempt: outcome.nextAttempt },
                committingAt: nextIntent.committingAt,
              };
            }
          }
          break;
        case 'parked':
          ctx.emit({ type: 'run-parked', runId: current.id, step: step.name, reason: outcome.reason });
          break;
        case 'rescheduled':
          ctx.emit({
            type: 'run-rescheduled',
            runId: current.id,
            step: step.name,
            until: outcome.until,
            reason: outcome.reason,
          });
          break;
        case 'suspended':
          ctx.emit({ type: 'run-waiting', runId: current.id, step: step.name, waitingFor: outcome.waitingFor });
          break;
      }
    } catch (error) {
      run = await recover(ctx, execution, error, resyncs);
      carried = [];
      resyncs += 1;
    }
  }
}

const MAX_RESYNCS_WITHOUT_PROGRESS = 5;

/** A local wait's answer: what the run's settling commit wrote, as a re-read would return it. */
function settledRun(
  run: LeasedRun,
  status: 'completed' | 'failed',
  output: Json | null,
  error: Json | null,
): SettledRun {
  return { id: run.id, workflow_name: run.workflowName, workflow_version: run.workflowVersion, status, output, error };
}
/** The pause before re-running a step whose commit the database refused for want of resources (doubling per re-run). */
const REFUSAL_BACKOFF = { firstMs: 200, maxMs: 5_000 } as const;

/**
 * The run's deadline passed (database time, as the claim or the last step's commit read it):
 * cancel it, fenced, instead of starting the step. The `run_settled` trigger closes the attempt
 * this claim opened and cancels the run's children. Its open intents, if any, are settled by the
 * reconciler like those of any cancelled run.
 */
async function cancelAtDeadline(ctx: DriverContext, s: StepExecution): Promise<void> {
  await insertStart(s);
  const compensateFrom = compensationStart(s.workflow, s.step);
  const cancelled = await commitKnowingOutcome(
    s,
    () =>
      compensateFrom === undefined
        ? cancelOverdue(ctx.db, s.lease)
        : compensateOverdue(ctx.db, s.lease, compensateFrom),
    { retry: true },
  );
  if (!cancelled) throw leaseLost(s.lease, 'the deadline cancel');
  ctx.emit({ type: 'run-deadline-exceeded', runId: s.lease.runId, step: s.step.name });
  if (compensateFrom !== undefined)
    ctx.emit({ type: 'run-compensating', runId: s.lease.runId, step: s.step.name, reason: 'failure' });
}

/**
 * The claim took the run over from a step that crashed its worker again and opened no attempt:
 * back off, or give up at the crash limit (`commitCrash`). If this commit's outcome is unknown
 * nothing is retried here: the lease expires, and the next claim, finding no attempt to
 * abandon, opens one — the step runs once more without this backoff, and a crash there counts.
 */
async function settleCrash(
  ctx: DriverContext,
  run: LeasedRun,
  workflow: RegisteredWorkflow,
  step: StepDefinition,
): Promise<void> {
  const lease: Lease = { runId: run.id, fencingToken: run.fencingToken, workerId: ctx.workerId, leaseMs: ctx.leaseMs };
  try {
    const outcome = await commitCrash(ctx.db, {
      lease,
      step,
      crashes: run.crashes,
      canReconcile: workflow.reconciler(step.name) !== undefined,
      compensateFrom: compensationStart(workflow, step),
      stepCompensated: compensationOf(workflow, step.name) !== undefined,
    });
    ctx.emit({ type: 'step-crashed', runId: run.id, step: step.name, crashes: run.crashes, outcome });
    if (outcome.kind === 'parked')
      ctx.emit({ type: 'run-parked', runId: run.id, step: step.name, reason: outcome.reason });
    if (outcome.kind === 'compensating')
      ctx.emit({ type: 'run-compensating', runId: run.id, step: step.name, reason: 'failure' });
  } catch (error) {
    if (error instanceof LeaseLostError) {
      ctx.emit({ type: 'lease-lost', runId: run.id, fencingToken: run.fencingToken, step: step.name });
    } else {
      ctx.emit({ type: 'error', where: 'run', runId: run.id, error: serializeError(error) });
    }
  }
}

/**
 * Before a commit that cannot carry them (a queue ask, a wait, a child start, an intent, a
 * failure): writes the carried steps on their own, opening this step's attempt. `overdue` when
 * that commit found the run past its deadline: the run was cancelled instead (as after any
 * commit that reports it before a step). Nothing to do without a carry.
 */
async function flushBefore(ctx: DriverContext, s: StepExecution): Promise<'flushed' | 'overdue'> {
  await insertStart(s);
  const carry = s.carry;
  if (carry === undefined || carry.written) return 'flushed';
  const flushed = await commitKnowingOutcome(
    s,
    () =>
      flushCarry(ctx.db, {
        lease: s.lease,
        workflowName: s.run.workflowName,
        workflowVersion: s.run.workflowVersion,
        carry,
        step: s.step,
        attempt: s.attempt,
      }),
    { retry: true },
  );
  if (!flushed.fenced) throw leaseLost(s.lease, 'the carried steps');
  carry.written = true;
  reportCarried(ctx, s.run.id, carry);
  if (!flushed.overdue || s.step.compensates !== undefined) return 'flushed';
  await cancelAtDeadline(ctx, s);
  return 'overdue';
}

/**
 * The events of carried steps, once (`reported`) and only once the commit that wrote them is
 * durable: what each step's own commit would have reported, in step order.
 */
function reportCarried(ctx: DriverContext, runId: string, carry: Carry): void {
  if (!carry.written || carry.reported) return;
  carry.reported = true;
  for (const c of carry.steps) {
    if (c.output === undefined) ctx.emit({ type: 'step-skipped', runId, step: c.step.name });
    else
      ctx.emit({
        type: 'step-succeeded',
        runId,
        step: c.step.name,
        kind: c.step.kind,
        attempt: c.attempt,
        reused: false,
      });
  }
}

/**
 * Whether the commit that moves a run from `step` to `next` writes `next`'s intent too
 * (result-commit.ts `NextIntent`): `next` is an `external` step that nothing stands between the
 * commit and its intent — no condition to evaluate, no queue slot to ask for — and neither step
 * is a compensation (a compensating run's steps run in their own order).
 */
function opensIntentAhead(
  workflow: RegisteredWorkflow,
  step: StepDefinition,
  next: StepDefinition,
  runSlotHeld: boolean,
): boolean {
  return (
    next.kind === 'external' &&
    next.when === undefined &&
    next.compensates === undefined &&
    step.compensates === undefined &&
    !asksForSlot(workflow, next, runSlotHeld)
  );
}

/** `next`'s intent as the commit of `step` (output `output`) writes it, if its key and request can be computed now. */
function intentAhead(
  next: StepDefinition,
  run: LeasedRun,
  step: StepDefinition,
  output: Json | undefined,
  leaseMs: number,
): NextIntent | undefined {
  const steps = output === undefined ? run.outputs : withStoredOutput(run.outputs, step.name, output);
  const claim = claimAhead(next, { input: run.input, steps });
  return claim === undefined ? undefined : { ...claim, horizonMs: leaseMs + next.performTimeoutMs };
}

/** Whether a step asks for a queue slot before it runs (its own, or the run's first): a commit the carry cannot ride on. */
function asksForSlot(workflow: RegisteredWorkflow, step: StepDefinition, runSlotHeld: boolean): boolean {
  return step.queue !== undefined || (workflow.registration.workflow.queue !== undefined && !runSlotHeld);
}

/**
 * Decides what an error during a step means; returns the run to continue with, if any. Steps
 * carried before it and not yet written are lost with a lost lease or an unknown outcome (the
 * run is re-read: they run again), and written before a failure is recorded, so that attempt
 * history shows them succeeded and this attempt failed, as if each had committed alone.
 */
async function recover(
  ctx: DriverContext,
  s: StepExecution,
  error: unknown,
  resyncs: number,
): Promise<LeasedRun | undefined> {
  const { lease, step } = s;
  const recorded = !(error instanceof LeaseLostError || error instanceof ResyncNeeded || isConnectionError(error));
  if (recorded && s.run.pendingStart?.inserted === false) {
    try {
      await insertStart(s);
    } catch (insertError) {
      // Not in the database: nothing to record the failure on. The flight ends; its start inserts the run itself.
      ctx.emit({ type: 'error', where: 'run', runId: lease.runId, error: serializeError(insertError) });
      return undefined;
    }
  }
  if (recorded && s.carry !== undefined && !s.carry.written) {
    try {
      if ((await flushBefore(ctx, s)) === 'overdue') return undefined;
    } catch (flushError) {
      // Not known to be written: the failure is not recorded either. The run is re-read (or given up) and goes on from
      // wherever the database has it, running again whatever it does not show.
      const cause =
        flushError instanceof LeaseLostError || isConnectionError(flushError)
          ? flushError
          : new ResyncNeeded('the carried steps could not be written', { cause: flushError });
      return recover(ctx, { ...s, carry: undefined }, cause, resyncs);
    }
    // Written alone because the effect step's transaction found the deadline passed: the run is re-read.
    if (error instanceof CarriedPastDeadline)
      return untilReachable(s, () => loadLeasedRun(ctx.db, lease.runId, lease.fencingToken));
  }
  if (s.carry?.written === true) reportCarried(ctx, lease.runId, s.carry);
  if (error instanceof LeaseLostError) {
    ctx.emit({ type: 'lease-lost', runId: lease.runId, fencingToken: lease.fencingToken, step: step.name });
    return undefined;
  }
  if (error instanceof ResyncNeeded || isConnectionError(error)) {
    // A database out of resources is waited out with a growing pause between the re-runs of the
    // step, not retried at the pace of the handler.
    if (isResourceRefusal(error) || isResourceRefusal((error as Error).cause))
      await sleep(exponentialBackoffMs(resyncs + 1, REFUSAL_BACKOFF));
    try {
      const fresh = await untilReachable(s, () => loadLeasedRun(ctx.db, lease.runId, lease.fencingToken));
      if (fresh === undefined)
        ctx.emit({ type: 'lease-lost', runId: lease.runId, fencingToken: lease.fencingToken, step: step.name });
      return fresh;
    } catch (readError) {
      ctx.emit({ type: 'error', where: 'run', runId: lease.runId, error: serializeError(readError) });
      return undefined;
    }
  }
  const failure = error instanceof StepFailure ? error : new StepFailure(error);
  try {
    const workflow = s.workflow;
    const params: FailureParams = {
      lease,
      step,
      attempt: s.attempt,
      failure,
      canReconcile: workflow.reconciler(step.name) !== undefined,
      maxErrorBytes: s.limits.maxErrorBytes,
      compensateFrom: compensationStart(workflow, step),
      stepCompensated: compensationOf(workflow, step.name) !== undefined,
    };
    const outcome = await commitKnowingOutcome(s, () => commitFailure(ctx.db, params), { retry: true });
    // A run that failed for good has this record as its error, and no output (only a completion writes one).
    if (outcome.kind === 'failed' && ctx.waiters.watches(lease.runId)) {
      ctx.waiters.settled(settledRun(s.run, 'failed', null, toStoredJson(failureRecord(params)) ?? null));
    }
    ctx.emit({
      type: 'step-failed',
      runId: lease.runId,
      step: step.name,
      attempt: s.attempt,
      error: serializeError(failure.cause),
      phase: failure.phase,
      outcome,
    });
    if (outcome.kind === 'parked')
      ctx.emit({ type: 'run-parked', runId: lease.runId, step: step.name, reason: outcome.reason });
    if (outcome.kind === 'compensating')
      ctx.emit({ type: 'run-compensating', runId: lease.runId, step: step.name, reason: 'failure' });
    return undefined;
  } catch (commitError) {
    if (commitError instanceof LeaseLostError) {
      ctx.emit({ type: 'lease-lost', runId: lease.runId, fencingToken: lease.fencingToken, step: step.name });
      return undefined;
    }
    // Retried commits raise this only once the failure is known to be committed.
    if (commitError instanceof ResyncNeeded) return undefined;
    // The failure could not be recorded (errors are serialized so that this does not happen).
    // Record a plain stand-in instead; failing that, give the run back at once — never leave it
    // to wait out its lease and count as a crash, with the real error lost.
    ctx.emit({ type: 'error', where: 'run', runId: lease.runId, error: serializeError(commitError) });
    const standIn = new StepFailure(
      new Error(
        `the error of attempt ${s.attempt} could not be recorded (${serializeError(commitError).message}); it was: ${serializeError(failure.cause).message}`,
      ),
      failure.phase,
    );
    try {
      await commitFailure(ctx.db, {
        lease,
        step,
        attempt: s.attempt,
        failure: standIn,
        canReconcile: s.workflow.reconciler(step.name) !== undefined,
        maxErrorBytes: s.limits.maxErrorBytes,
        compensateFrom: compensationStart(s.workflow, step),
      });
    } catch {
      await releaseLeases(ctx.db, [lease], `the failure of attempt ${s.attempt} could not be recorded`).catch(() => {});
    }
    return undefined;
  }
}
