/*
 * What every executor shares: `StepExecution`, one attempt of one step as the run driver built it
 * (run, lease, attempt, carried steps, flight abort), the handler's context, output validation,
 * the effect steps' ledger claim (`effectClaim`, `claimAhead`), and the commit helpers that retry
 * a commit whose outcome is unknown and read the run again (`commitKnowingOutcome`). An attempt
 * ends in one of the run machine's transitions (store/state-machines.ts) through step-commits.ts;
 * this file holds no state across attempts.
 * Long because these are what every executor imports; the parts with state of their own are
 * apart (start-insert.ts, step-transaction.ts, ledger.ts).
 */
import type { Kysely } from 'kysely';
import type { StepDefinition } from '../../../dsl/workflow.js';
import type { StepContext } from '../../contracts/handler-types.js';
import { NonRetryableError, recordImmutableError, ValidationError } from '../../errors.js';
import type { PayloadLimits } from '../../limits/payload-limits.js';
import { checkRecordedOutput } from '../../limits/recorded-output.js';
import type { Json, LedgerflowDatabase, WaitingFor } from '../../store/tables.js';
import type { LeasedRun } from '../../store/leased-run.js';
import { exponentialBackoffMs, sleep } from '../../backoff.js';
import type { RegisteredWorkflow } from '../registry.js';
import { requestHash } from '../request-hash.js';
import { advanceRun } from '../step-commits.js';
import { attemptCommitState } from '../commit-outcome.js';
import { resultCommit, type AdvanceParams, type Continuation } from '../result-commit.js';
import { leaseLost, type Lease } from '../lease.js';
import { LeaseLostError } from '../../errors.js';
import {
  evaluateStepFunction,
  isResourceRefusal,
  ResyncNeeded,
  StepFailure,
  userCode,
  type FailurePhase,
} from '../step-errors.js';
import { isConnectionError } from '../../store/connection-errors.js';
import type { EffectClaim } from '../ledger.js';
import type { StepTrace } from '../../telemetry/telemetry.js';
import type { CommitQueue } from '../commit-queue.js';
import { openAttemptOf, type Carry } from '../carried-prefix.js';
import type { AbortLike, FlightAbort } from '../flight.js';

/** Everything one attempt of one step needs; built by the run driver. */
export interface StepExecution {
  readonly db: Kysely<LedgerflowDatabase>;
  readonly lease: Lease;
  readonly run: LeasedRun;
  readonly workflow: RegisteredWorkflow;
  readonly step: StepDefinition;
  readonly attempt: number;
  /** Aborted when the lease is lost or the worker gives up waiting on stop (a flag, not an AbortSignal: flight.ts). */
  readonly signal: FlightAbort;
  /** How many children a `child`/`forEach` step starts per commit (`WorkerOptions.childrenPerCommit`). */
  readonly childrenPerCommit: number;
  /** The database's payload limits as this worker last read them: outputs, children's inputs, error records. */
  readonly limits: PayloadLimits;
  /** The attempt's span (a no-op without telemetry): executors add the key, perform and reconcile spans. */
  readonly trace: StepTrace;
  /** What the step's commit does with the run, given the step's output (`undefined`: the step was skipped). */
  continuation(output: Json | undefined): Continuation;
  /**
   * Plain steps before this one whose results are not committed yet (carried-prefix.ts): the
   * attempt's first commit writes them, and until then the database shows the run at the first
   * of them, whose attempt is the one a commit's outcome is read from.
   */
  readonly carry?: Carry | undefined;
  /**
   * This attempt's intent, already written by the commit that moved the run to this `external`
   * step (result-commit.ts `NextIntent`): the attempt performs without an intent commit. The
   * driver sets it only for the attempt that commit opened.
   */
  readonly intentOpened?: OpenedIntentEarlier | undefined;
  /** The worker's result commits, grouped across runs (group commit); see `CommitQueue`. */
  readonly commits: CommitQueue;
  /** Reports a commit whose outcome became unknown (for the worker's event stream). */
  onUnknownOutcome(error: unknown): void;
  /**
   * Ends another session's transaction at once (PostgreSQL: `pg_terminate_backend`): how a
   * transactional step whose statement is stuck (a lock wait) is ended when its lease is lost or
   * its time is up. Absent where sessions cannot block each other (PGlite: one connection).
   */
  readonly terminateBackend?: (pid: number) => Promise<void>;
  /** The store's connections pipeline (`Store.pipelines`): a transactional step sends its statements together where it can. */
  readonly pipelines?: boolean;
}

/** An intent the previous step's commit wrote for this attempt (see {@link StepExecution.intentOpened}). */
export interface OpenedIntentEarlier {
  readonly claim: EffectClaim;
  /** When that commit was sent (`performance.now()`): perform must start within one lease of it. */
  readonly committingAt: number;
}

export type StepOutcome =
  | {
      readonly kind: 'advanced';
      readonly output: Json;
      readonly continuation: Continuation['kind'];
      /** The next step's attempt when the lease is held. */
      readonly nextAttempt: number | null;
      /** Set when no handler ran because the ledger already had the effect. */
      readonly reused?: boolean;
      /** Runs a fused claim took in the same commit (`complete` with `claimNext` only). */
      readonly claimed?: readonly LeasedRun[] | undefined;
      /** `hold` only: the run's deadline has passed. */
      readonly overdue?: boolean;
      /** The step's condition said no: recorded as skipped, `output` is not one. */
      readonly skipped?: boolean;
    }
  | { readonly kind: 'parked'; readonly reason: string }
  | { readonly kind: 'rescheduled'; readonly until: Date; readonly reason: string }
  /** A sleep, waitFor, child or forEach step cannot finish yet: the run is `waiting`, without a lease. */
  | { readonly kind: 'suspended'; readonly waitingFor: WaitingFor; readonly due: boolean };

export type StepExecutor = (execution: StepExecution) => Promise<StepOutcome>;

/**
 * The context every handler gets. Under {@link bounded}, `signal` is the handler's own
 * {@link HandlerSignal}: its AbortSignal is made when the handler first reads `ctx.signal`.
 * Compose with an object literal that keeps the getter (`handlerContext(s, signal, { key })`),
 * not with a spread (a spread reads the getter, and so makes the signal).
 */
export function handlerContext<Extra extends object = object>(
  s: StepExecution,
  signal: HandlerSignal | FlightAbort = s.signal,
  extra?: Extra,
): StepContext<unknown, Readonly<Record<string, Json>>> & Extra {
  const context = {
    runId: s.run.id,
    workflowName: s.run.workflowName,
    stepName: s.step.name,
    attempt: s.attempt,
    input: s.run.input,
    steps: s.run.outputs,
    get signal(): AbortSignal {
      return typeof signal === 'function' ? signal() : signal.signal;
    },
  };
  // Descriptors, not values: an extra's getter (ctx.tx, ctx.db) stays lazy too. (One key at a
  // time: Object.getOwnPropertyDescriptors costs more than the few keys an executor adds.)
  if (extra !== undefined)
    for (const key of Object.keys(extra))
      Object.defineProperty(context, key, Object.getOwnPropertyDescriptor(extra, key)!);
  return context as StepContext<unknown, Readonly<Record<string, Json>>> & Extra;
}

/**
 * A handler's abort signal, made on first use: creating an AbortSignal costs Node 20 about as
 * much CPU as the rest of a one-step workflow's bookkeeping, and most handlers never read it.
 * Aborted at once when made after the reason to abort came (time up, lease lost).
 */
export type HandlerSignal = () => AbortSignal;

/**
 * Checks a handler's output (or a provider's answer to the worker's own lookup) as every path
 * that records one does ({@link checkRecordedOutput}) and returns it as it is recorded. Invalid
 * output is a failed attempt whose error names the workflow, the step and each field; output over
 * `limits.maxOutputBytes` or that cannot be stored as JSON is a failed attempt that is not
 * retried (the same handler would return the same output again). The value returned is in its
 * stored form (`toStoredJson`): what every later claim reads back from jsonb.
 */
export function validateOutput(s: Pick<StepExecution, 'step' | 'run' | 'limits'>, value: unknown): Json {
  const checked = checkRecordedOutput(s.step, s.run.workflowName, value, s.limits);
  if (checked.ok) return checked.output;
  switch (checked.problem) {
    case 'schema': {
      const issues = checked.issues.map((issue) => `${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`);
      throw new StepFailure(
        new ValidationError(
          `Step "${s.step.name}" of workflow "${s.run.workflowName}" returned invalid output: ${issues.join('; ')}`,
          issues,
        ),
      );
    }
    case 'too-large':
      throw new StepFailure(checked.error);
    case 'unstorable':
      throw new StepFailure(
        new NonRetryableError(`Step "${s.step.name}" returned output that cannot be stored as JSON: ${checked.reason}`),
      );
  }
}

/**
 * Runs a handler under the step's time limit. Its `signal` aborts when the lease is lost, when
 * `limitMs` passes, or when the worker gives up waiting on stop — and the attempt stops waiting
 * for it then, whether or not the handler heeds the signal (JavaScript cannot stop it): past the
 * limit the attempt fails with `timeout()`'s error (phase `phase`); on a lost lease it throws
 * the {@link LeaseLostError}. Anything the handler throws becomes a {@link StepFailure}.
 */
export async function bounded<T>(
  s: Pick<StepExecution, 'signal'>,
  limitMs: number,
  timeout: () => Error,
  phase: FailurePhase,
  handler: (signal: HandlerSignal) => T | Promise<T>,
): Promise<T> {
  if (s.signal.aborted) throw lostLease(s.signal);
  let controller: AbortController | undefined;
  // The first reason to abort, kept for a signal made after it came.
  let aborted: { readonly reason: unknown } | undefined;
  const abort = (reason: unknown): void => {
    aborted ??= { reason };
    controller?.abort(aborted.reason);
  };
  const signal: HandlerSignal = () => {
    if (controller === undefined) {
      controller = new AbortController();
      if (aborted !== undefined) controller.abort(aborted.reason);
    }
    return controller.signal;
  };
  let timer: NodeJS.Timeout | undefined;
  let forward: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    forward = () => {
      abort(s.signal.reason);
      reject(lostLease(s.signal));
    };
    s.signal.addEventListener('abort', forward, { once: true });
    timer = setTimeout(() => {
      const error = timeout();
      abort(error);
      reject(new StepFailure(error, phase));
    }, limitMs);
  });
  try {
    return await Promise.race([userCode(() => handler(signal), phase), stopped]);
  } finally {
    clearTimeout(timer);
    if (forward !== undefined) s.signal.removeEventListener('abort', forward);
  }
}

/**
 * The one-statement result commit of a step whose output needs no ledger row (`step` and the
 * built-in kinds): result + attempt succeeded + transition, on `db` (the caller's transaction,
 * if the commit must go with other statements), else through the worker's commit queue (grouped
 * with other runs' commits). `output` comes from {@link validateOutput}.
 */
export async function commitOutput(
  s: StepExecution,
  output: Json,
  db?: Kysely<LedgerflowDatabase>,
): Promise<StepOutcome> {
  return commitResult(s, resultCommit(s, output), output, db);
}

/** {@link commitOutput} of a result commit already built (its continuation asked for). */
export async function commitResult(
  s: StepExecution,
  commit: AdvanceParams,
  output: Json,
  db?: Kysely<LedgerflowDatabase>,
): Promise<StepOutcome> {
  const result = await (db === undefined ? s.commits.advance(commit) : advanceRun(db, commit));
  if (!result.fenced) throw leaseLost(s.lease, 'the step result');
  return {
    kind: 'advanced',
    output,
    continuation: commit.continuation.kind,
    nextAttempt: result.nextAttempt,
    claimed: result.claimed,
    overdue: result.overdue,
  };
}

/**
 * Evaluates the step's condition (pure, checked like a key) and, when it says no, records the
 * step as skipped — no handler, no ledger row, output NULL — in one fenced commit that moves the
 * run on. `undefined` when the step is to run.
 */
export async function skipUnlessWanted(s: StepExecution): Promise<StepOutcome | undefined> {
  return stepWanted(s) ? undefined : commitSkipped(s);
}

/** The step's condition (pure, checked like a key): whether the step is to run. True without one. */
export function stepWanted(s: Pick<StepExecution, 'step' | 'run'>): boolean {
  const when = s.step.when;
  if (when === undefined) return true;
  const context = keyContext(s);
  const wanted = evaluateStepFunction(() => when(context), `The condition (when) of step "${s.step.name}"`);
  if (typeof wanted !== 'boolean') {
    throw new StepFailure(
      new TypeError(
        `The condition (when) of step "${s.step.name}" must return a boolean (got ${JSON.stringify(wanted)}).`,
      ),
    );
  }
  return wanted;
}

/**
 * Records the step as skipped — no handler, no ledger row, output NULL — in one fenced commit
 * that moves the run on: a condition that said no, or a compensation whose step's effect did not happen.
 */
export async function commitSkipped(s: StepExecution): Promise<StepOutcome> {
  const commit = { ...resultCommit({ ...s, continuation: () => s.continuation(undefined) }, null), skipped: true };
  const result = await commitKnowingOutcome(s, () => s.commits.advance(commit), { retry: true });
  if (!result.fenced) throw leaseLost(s.lease, 'the skipped step');
  return {
    kind: 'advanced',
    output: null,
    skipped: true,
    continuation: commit.continuation.kind,
    nextAttempt: result.nextAttempt,
    claimed: result.claimed,
    overdue: result.overdue,
  };
}

/** The key context of the current step: the run's input and the outputs of the steps before it. */
export function keyContext(s: Pick<StepExecution, 'run'>): {
  readonly input: Json;
  readonly steps: Readonly<Record<string, Json>>;
} {
  return { input: s.run.input, steps: s.run.outputs };
}

/** The lease loss an aborted flight signal stands for (its reason, or one made from it). */
export function lostLease(signal: AbortLike): LeaseLostError {
  return signal.reason instanceof LeaseLostError ? signal.reason : new LeaseLostError(String(signal.reason));
}

/** The step's key and request hash, computed from the persisted input and earlier outputs. */
export async function effectClaim(s: StepExecution): Promise<EffectClaim> {
  const context = keyContext(s);
  const key = stepKey(s.step, context);
  s.trace.keyed(key);
  const request = s.step.request ? await userCode(() => s.step.request!(context)) : context;
  return { key, requestHash: requestHash(request), attempt: s.attempt };
}

/** `step`'s idempotency key for `context`: a {@link StepFailure} when its key function throws or returns no key. */
function stepKey(step: StepDefinition, context: ReturnType<typeof keyContext>): string {
  const key = evaluateStepFunction(() => step.key!(context), `The key function of step "${step.name}"`);
  if (typeof key !== 'string' || key === '') {
    throw new StepFailure(
      new TypeError(
        `The key function of step "${step.name}" must return a non-empty string (got ${JSON.stringify(key)}).`,
      ),
    );
  }
  return key;
}

/**
 * The key and request hash of `step` for a run whose input and earlier outputs are `context`, if
 * they can be computed now, synchronously and without error — for a commit that writes the
 * step's intent ahead of it (`NextIntent`). `undefined` otherwise (an async `request`, a key
 * function that throws or returns no key): the step's own attempt then computes them, and fails
 * as it always would.
 */
export function claimAhead(
  step: StepDefinition,
  context: { readonly input: Json; readonly steps: Readonly<Record<string, Json>> },
): Omit<EffectClaim, 'attempt'> | undefined {
  if (step.key === undefined) return undefined;
  try {
    const key = stepKey(step, context);
    const request: unknown = step.request === undefined ? context : step.request(context);
    if (typeof (request as { then?: unknown } | null)?.then === 'function') {
      (request as Promise<unknown>).then(undefined, () => {});
      return undefined;
    }
    return { key, requestHash: requestHash(request) };
  } catch {
    return undefined;
  }
}

const RESYNC_BACKOFF = { firstMs: 100, maxMs: 2_000 } as const;

/**
 * Runs a commit. When the connection breaks during it the outcome is unknown; this waits for
 * the database, reads the attempt row (every step commit closes it) and then either retries the
 * same commit (`retry`: it did not happen and may be repeated as is), or asks the driver to
 * re-read the run ({@link ResyncNeeded}), or gives up the run when the token moved on.
 */
export async function commitKnowingOutcome<T>(
  s: Pick<StepExecution, 'db' | 'lease' | 'step' | 'attempt' | 'onUnknownOutcome' | 'carry'>,
  commit: () => Promise<T>,
  options: { readonly retry: boolean },
): Promise<T> {
  let refusedSince: number | undefined;
  for (let refusals = 1; ; refusals++) {
    try {
      return await commit();
    } catch (error) {
      if (!isConnectionError(error)) throw recordImmutableError(error) ?? error;
      s.onUnknownOutcome(error);
      // Refused for want of resources: nothing ran. Wait (doubling) and try the same commit again,
      // for up to one lease; a commit that must not be repeated as is resyncs, after the wait.
      if (isResourceRefusal(error)) {
        refusedSince ??= performance.now();
        await sleep(exponentialBackoffMs(refusals, RESYNC_BACKOFF));
        if (!options.retry)
          throw new ResyncNeeded('the database refused the commit for want of resources', { cause: error });
        if (performance.now() - refusedSince <= s.lease.leaseMs) continue;
        throw error;
      }
      // Carried steps not yet written: the attempt the database shows running is the first of them.
      const open = openAttemptOf(s.carry, s.step, s.attempt);
      const state = await untilReachable(s, () => attemptCommitState(s.db, s.lease, open.step.name, open.attempt));
      if (state === 'lost') throw leaseLost(s.lease, 'the step commit');
      if (state === 'committed' || !options.retry) throw new ResyncNeeded();
    }
  }
}

/** Retries a read with backoff while the database is unreachable, for at most one lease. */
export async function untilReachable<T>(s: Pick<StepExecution, 'lease'>, read: () => Promise<T>): Promise<T> {
  const started = performance.now();
  for (let attempt = 1; ; attempt += 1) {
    await sleep(exponentialBackoffMs(attempt, RESYNC_BACKOFF));
    try {
      return await read();
    } catch (error) {
      if (!isConnectionError(error) || performance.now() - started > s.lease.leaseMs) throw error;
    }
  }
}
