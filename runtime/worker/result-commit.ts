import type { StepDefinition } from '../../dsl/workflow.js';
import type { Json } from '../store/tables.js';
import type { LeasedRun, LeasedRunRow } from '../store/leased-run.js';
import type { Carry } from './carried-prefix.js';
import type { ClaimOptions } from './claim.js';
import type { Lease } from './lease.js';
import type { WorkflowRegistry } from './registry.js';

/*
 * What a step's result commit is asked to do and what it answers: the parameters of
 * `advanceRun` / `advanceRuns` (step-commits.ts) — the continuation, the ledger effect, carried
 * steps, a fused claim — and the row its statement returns (commit-statement.ts). Plain data, no
 * state: the executors, the reconciler and an operator's resolve build these; `resultCommit`
 * builds them from an attempt.
 */

/** What happens to the run after its step is committed. */
export type Continuation =
  /**
   * Keep the lease and open the next step's attempt in the same commit; with `intent`, also the
   * next (`external`) step's intent (see {@link NextIntent}).
   */
  | { readonly kind: 'hold'; readonly nextStep: string; readonly intent?: NextIntent }
  /** Give the run back as `pending`, due now (worker stopping; reconciler). */
  | { readonly kind: 'release' }
  /**
   * That was the last step: `completed`, with the outputs of all steps as the run's output.
   * With `claimNext`, the same commit also claims pending runs for the slot it frees (fused
   * claim: one commit instead of two per run while there is a backlog).
   */
  | {
      readonly kind: 'complete';
      readonly runOutput: Json;
      readonly claimNext?: FusedClaim;
      /** The last compensation of a run being compensated: the run ends `compensated` instead. */
      readonly compensated?: true;
    };

/**
 * The intent of the next step, an `external` one, written by the commit that moves the run to it
 * instead of by an intent commit of its own: one commit and one round trip fewer per external
 * step that follows another step's commit. Exactly the row the intent commit writes
 * (`openIntentStatement`): status `intent`, this key and request hash, the next step's new
 * attempt, the lease's token, `intent_at` the statement's time and the horizon `leaseMs +
 * performTimeoutMs` after it. Written only if the step has no ledger row yet and the run is not
 * past its deadline; the commit sets `opened` (fenced and written), and only then does the
 * attempt perform without an intent commit — otherwise it opens its intent as always.
 */
export interface NextIntent {
  readonly key: string;
  readonly requestHash: string;
  /** `leaseMs + performTimeoutMs` of the next step: where its horizon lies after the commit. */
  readonly horizonMs: number;
  /** Set by {@link advanceRun} once the commit's statement wrote the intent (final at the transaction's COMMIT). */
  opened?: boolean;
}

/** A claim that rides on a step's completion commit; see {@link advanceRun}. */
export interface FusedClaim {
  readonly registry: WorkflowRegistry;
  readonly options: ClaimOptions;
}

export interface AdvanceParams {
  readonly lease: Lease;
  readonly workflowName: string;
  readonly workflowVersion: number;
  readonly step: StepDefinition;
  /** The worker's `running` attempt to close as succeeded; `undefined` for the reconciler. */
  readonly attempt: number | undefined;
  /** The attempt the result is attributed to (the performing attempt for a reconciled effect). */
  readonly resultAttempt: number;
  readonly output: Json;
  /** Ledger row the result points at (effect kinds only), and what this commit does to it. */
  readonly effect?: ResultEffect;
  /** The step's condition said no: recorded as skipped, output NULL, no ledger row whatever the kind. */
  readonly skipped?: boolean;
  readonly continuation: Continuation;
  /**
   * Plain steps before this one whose results this commit writes first (see carried-prefix.ts):
   * the run moves from the first of them, and this step's attempt, which no commit opened, is
   * inserted finished.
   */
  readonly carry?: Carry;
}

/** What a result commit needs from the attempt that makes it (a `StepExecution` has all of it). */
export interface ResultCommitSource {
  readonly lease: Lease;
  readonly run: { readonly workflowName: string; readonly workflowVersion: number };
  readonly step: StepDefinition;
  /** The attempt to close as succeeded. */
  readonly attempt: number;
  /** What the commit does with the run, given the output (`undefined`: skipped); asked once per result commit. */
  continuation(output: Json | undefined): Continuation;
  /** Carried steps the attempt's first commit writes; none once a fenced commit wrote them. */
  readonly carry?: Carry | undefined;
}

/**
 * The {@link AdvanceParams} of an attempt's result commit, so that each executor states only
 * what differs (the output and the ledger effect): the attempt's lease, run, step and attempt,
 * the result attributed to the attempt that performed the effect — the intent's writer for
 * `record-intent`, this attempt otherwise — and the continuation for `output`, asked for once
 * here (it may reserve a fused claim): read it back as `.continuation`.
 */
export function resultCommit(s: ResultCommitSource, output: Json, effect?: ResultEffect): AdvanceParams {
  return {
    lease: s.lease,
    workflowName: s.run.workflowName,
    workflowVersion: s.run.workflowVersion,
    step: s.step,
    attempt: s.attempt,
    resultAttempt: effect?.mode === 'record-intent' ? effect.attempt : s.attempt,
    output,
    ...(effect === undefined ? {} : { effect }),
    continuation: s.continuation(output),
    ...(s.carry !== undefined && !s.carry.written ? { carry: s.carry } : {}),
  };
}

/** The ledger row a step's result points at, and what the result commit does to it. */
export type ResultEffect =
  /** The row is already `recorded` (its output is being reused): only referenced. */
  | { readonly key: string; readonly mode: 'reference' }
  /**
   * A `transactional` step whose handler sent nothing through `ctx.tx`: the row is inserted,
   * `recorded` with the output, in this same statement — and the run moves only if the step has
   * no ledger row yet; if it has one, nothing changes and {@link AdvanceResult.effectExists} says so.
   */
  | { readonly key: string; readonly mode: 'insert-recorded'; readonly attempt: number; readonly requestHash: string }
  /** A `transactional` step's row, inserted `recorded` by this same transaction, gets its output. */
  | { readonly key: string; readonly mode: 'fill-recorded'; readonly attempt: number }
  /** An `external` intent written by `attempt` becomes `recorded` (perform returned, or reconcile found it). */
  | { readonly key: string; readonly mode: 'record-intent'; readonly attempt: number; readonly resolution?: string };

export interface AdvanceResult {
  readonly fenced: boolean;
  /** The next step's attempt, opened by this commit (`hold` only). */
  readonly nextAttempt: number | null;
  /** Runs the fused claim took (`complete` with `claimNext` only; otherwise `undefined`). */
  readonly claimed: readonly LeasedRun[] | undefined;
  /** With `insert-recorded` only: the step already had a ledger row, so this statement changed nothing. */
  readonly effectExists?: boolean;
  /** `hold` only: the run's deadline has passed; the driver cancels it instead of running the next step. */
  readonly overdue: boolean;
}

/** The row {@link advanceRunStatement} returns, one per commit ({@link advanceRunsStatement}). */
export interface AdvanceRow {
  /** The commit's place in the statement. */
  ord: number;
  fenced: boolean;
  next_attempt: number | null;
  claimed: LeasedRunRow[] | null;
  effect_exists: boolean;
  /** NULL unless the commit holds the run. */
  overdue: boolean | null;
  /** `hold` with a {@link NextIntent} only: the statement wrote it. */
  intent_opened?: boolean;
}
