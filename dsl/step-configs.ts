import type { z } from 'zod';
import type { AnyEvent } from './event.js';
import type { QueueDefinition } from './queue.js';
import type { RetryPolicy } from './retry-policy.js';

/*
 * What the step methods of a workflow take (`.step`, `.transactional`, `.external`, `.sleep`,
 * `.waitFor`, and the parts `.child` and `.forEach` share with them), what a key, a condition and
 * a queue's partition key see, and what the built-in steps output. The configs that name a child
 * workflow (`ChildConfig`, `ForEachConfig`) are beside the builder in workflow.ts.
 */

/**
 * What a key function sees: the run's validated input and the checkpointed outputs of the
 * steps declared *before* this one. Both are persisted before the step first runs, so a pure
 * function of them yields the same key on every retry, worker and restart.
 */
export interface KeyContext<TInput, TPrior> {
  readonly input: TInput;
  readonly steps: TPrior;
}

export type KeyFn<TInput, TPrior> = (ctx: KeyContext<TInput, TPrior>) => string;

/**
 * A step's condition: a pure function of `input` and earlier `steps` (checked by codegen like a
 * key). When it returns false the step is recorded as skipped — not run, no ledger row — and
 * later steps see its output as `undefined`.
 */
export type WhenFn<TInput, TPrior> = (ctx: KeyContext<TInput, TPrior>) => boolean;

/** What the item functions of `forEach` see: one item of the list, its position, and the run's context. */
export interface ItemContext<TItem, TInput, TPrior> extends KeyContext<TInput, TPrior> {
  readonly item: TItem;
  readonly index: number;
}

export interface ConditionConfig<TInput, TPrior, TWhen extends boolean> {
  /** Run the step only when this returns true; see {@link WhenFn}. */
  readonly when?: (ctx: KeyContext<TInput, TPrior>) => TWhen;
}

interface CommonStepConfig<TOutput extends z.ZodType> {
  /** Schema of the step's output; the worker validates the handler's result against it. */
  readonly output: TOutput;
  readonly retry?: RetryPolicy;
}

/**
 * Puts a step's attempts (or, on the workflow, whole runs) behind a queue's limits: an attempt
 * starts only once it holds a slot, and gives it back when it ends. `partitionKey` is a pure
 * function of the same context as a key (checked by codegen like one); without it every run is
 * in one partition.
 */
export interface QueueUse<TContext> {
  readonly queue: QueueDefinition;
  readonly partitionKey?: (ctx: TContext) => string;
}

interface QueuedStepConfig<TInput, TPrior> {
  /** Each attempt of this step waits for a slot of this queue and holds it while it runs. */
  readonly queue?: QueueUse<KeyContext<TInput, TPrior>>;
}

/** `.sleep(name, { for })`: how long, in milliseconds, from when the run first reaches the step. */
export interface SleepForConfig<TInput, TPrior, TWhen extends boolean> extends ConditionConfig<TInput, TPrior, TWhen> {
  readonly for: (ctx: KeyContext<TInput, TPrior>) => number;
  readonly until?: never;
}

/** `.sleep(name, { until })`: an instant (a `Date` or an ISO 8601 string). */
export interface SleepUntilConfig<TInput, TPrior, TWhen extends boolean>
  extends ConditionConfig<TInput, TPrior, TWhen> {
  readonly until: (ctx: KeyContext<TInput, TPrior>) => Date | string;
  readonly for?: never;
}

/** The output of a `sleep` step: the wake-up time that was fixed when the run reached it. */
export interface SleepOutput {
  readonly until: string;
}

export interface WaitForConfig<TInput, TPrior, TEvent extends AnyEvent, TWhen extends boolean>
  extends ConditionConfig<TInput, TPrior, TWhen> {
  readonly event: TEvent;
  /**
   * The correlation key the event must carry (a pure function, checked like a key). Without it
   * the step waits for a signal to this run: `client.signal(runId, event, payload)`.
   */
  readonly match?: (ctx: KeyContext<TInput, TPrior>) => string;
  /** Give up waiting after this long (from when the run first reaches the step); the output then says `timeout`. */
  readonly timeoutMs?: number;
  readonly retry?: RetryPolicy;
}

/** The output of a `waitFor` step: the event it received, or that it timed out (never a throw). */
export type WaitForOutput<TPayload> =
  | { readonly status: 'received'; readonly payload: TPayload; readonly eventId: string; readonly receivedAt: string }
  | { readonly status: 'timeout'; readonly timedOutAt: string };

interface HandlerTimeoutConfig {
  /**
   * How long one attempt's handler may run. Past it, the handler's `signal` aborts, the attempt
   * fails as retryable (`HandlerTimeoutError`) and a `transactional` step's transaction is rolled
   * back. Default 5 minutes for `step`, 60 s for `transactional` (it holds a transaction open).
   */
  readonly timeoutMs?: number;
}

export interface PlainStepConfig<TOutput extends z.ZodType, TInput = unknown, TPrior = unknown>
  extends CommonStepConfig<TOutput>,
    HandlerTimeoutConfig,
    QueuedStepConfig<TInput, TPrior> {}

interface KeyedStepConfig<TInput, TPrior, TOutput extends z.ZodType>
  extends CommonStepConfig<TOutput>,
    QueuedStepConfig<TInput, TPrior> {
  /** Idempotency key: a pure function of `input` and earlier `steps` (checked by codegen). */
  readonly key: KeyFn<TInput, TPrior>;
  /** What the ledger hashes to detect a changed request under the same key. Defaults to the key context. */
  readonly request?: (ctx: KeyContext<TInput, TPrior>) => unknown;
}

/**
 * What undoes a step's effect when its run fails for good or is cancelled with `compensate`: an
 * effect of the same kind with its own key (checked by codegen like any key, and different from
 * the step's) and its own handler, named `name` in the generated contract. It runs only if the
 * step's effect is recorded, after the compensations of later steps, exactly once. Its `steps`
 * include the compensated step's own output.
 */
export interface CompensationConfig<TCompName extends string, TInput, TPrior, TOutput extends z.ZodType> {
  /** Names the compensation's handler and its ledger rows; unique among the workflow's steps and compensations. */
  readonly name: TCompName;
  readonly key: KeyFn<TInput, TPrior>;
  /** Schema of the compensation's output; the worker validates the handler's result against it. */
  readonly output: TOutput;
  /** What the ledger hashes to detect a changed request under the same key. Defaults to the key context. */
  readonly request?: (ctx: KeyContext<TInput, TPrior>) => unknown;
  /** Its own retry policy; exhausted, the run ends `compensation_failed` (parked for an operator). */
  readonly retry?: RetryPolicy;
}

export interface TransactionalCompensationConfig<TCompName extends string, TInput, TPrior, TOutput extends z.ZodType>
  extends CompensationConfig<TCompName, TInput, TPrior, TOutput>,
    HandlerTimeoutConfig {}

export interface ExternalCompensationConfig<
  TCompName extends string,
  TInput,
  TPrior,
  TOutput extends z.ZodType,
  TIdempotent extends boolean,
> extends CompensationConfig<TCompName, TInput, TPrior, TOutput> {
  /** As for external steps: `true` when the provider dedupes by key; otherwise the handler needs `reconcile`. */
  readonly idempotentByKey?: TIdempotent;
  readonly performTimeoutMs?: number;
}

export interface TransactionalStepConfig<TInput, TPrior, TOutput extends z.ZodType>
  extends KeyedStepConfig<TInput, TPrior, TOutput>,
    HandlerTimeoutConfig {}

export interface ExternalStepConfig<TInput, TPrior, TOutput extends z.ZodType, TIdempotent extends boolean>
  extends KeyedStepConfig<TInput, TPrior, TOutput> {
  /**
   * `true` when the provider itself dedupes by key (Stripe-style): a crashed attempt may be
   * retried with the same key instead of reconciled. Otherwise the handler must supply `reconcile`.
   */
  readonly idempotentByKey?: TIdempotent;
  /**
   * How long one `perform` may take before its outcome is treated as unknown. Default 30 s.
   * Your HTTP client's own timeout (and retries) must end within it: the intent is reconciled
   * after `intent time + lease + performTimeoutMs`, which assumes no request of this attempt
   * can still reach the provider by then.
   */
  readonly performTimeoutMs?: number;
}
