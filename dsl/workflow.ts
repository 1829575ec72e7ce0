import type { z } from 'zod';
import { STEP_NAME, WORKFLOW_NAME } from './names.js';
import { resolveRetryPolicy, type ResolvedRetryPolicy, type RetryPolicy } from './retry-policy.js';
import type { StepKind } from './step-kind.js';

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

/** Type-level record of one declared step; never exists at run time. */
export interface StepSpec<TKind extends StepKind, TOutput, TPrior, TIdempotent extends boolean> {
  readonly kind: TKind;
  readonly output: TOutput;
  /** Outputs of the steps declared before this one: all a handler or key of this step may see. */
  readonly prior: TPrior;
  readonly idempotentByKey: TIdempotent;
}

interface CommonStepConfig<TOutput extends z.ZodType> {
  /** Schema of the step's output; the worker validates the handler's result against it. */
  readonly output: TOutput;
  readonly retry?: RetryPolicy;
}

interface HandlerTimeoutConfig {
  /**
   * How long one attempt's handler may run. Past it, the handler's `signal` aborts, the attempt
   * fails as retryable (`HandlerTimeoutError`) and a `transactional` step's transaction is rolled
   * back. Default 5 minutes for `step`, 60 s for `transactional` (it holds a transaction open).
   */
  readonly timeoutMs?: number;
}

export interface PlainStepConfig<TOutput extends z.ZodType> extends CommonStepConfig<TOutput>, HandlerTimeoutConfig {}

interface KeyedStepConfig<TInput, TPrior, TOutput extends z.ZodType> extends CommonStepConfig<TOutput> {
  /** Idempotency key: a pure function of `input` and earlier `steps` (checked by codegen). */
  readonly key: KeyFn<TInput, TPrior>;
  /** What the ledger hashes to detect a changed request under the same key. Defaults to the key context. */
  readonly request?: (ctx: KeyContext<TInput, TPrior>) => unknown;
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

/** Plain run-time description of one step, as the worker and codegen's model see it. */
export interface StepDefinition {
  readonly name: string;
  readonly kind: StepKind;
  readonly position: number;
  readonly output: z.ZodType;
  readonly retry: ResolvedRetryPolicy;
  readonly idempotentByKey: boolean;
  readonly performTimeoutMs: number;
  /** The time limit of one attempt's handler: `timeoutMs`, or `performTimeoutMs` for `external`. */
  readonly timeoutMs: number;
  // Method syntax on purpose: a key typed for one workflow's input must be storable here.
  key?(ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>): string;
  request?(ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>): unknown;
}

export const DEFAULT_PERFORM_TIMEOUT_MS = 30_000;
export const DEFAULT_STEP_TIMEOUT_MS = 300_000;
export const DEFAULT_TRANSACTIONAL_TIMEOUT_MS = 60_000;

type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** Readable compile error for a step name declared twice. */
export interface DuplicateStepName<TName extends string> {
  readonly '~error': `step "${TName}" is already declared in this workflow; step names must be unique`;
}

type NewStepName<TName extends string, TSteps> = TName &
  (TName extends keyof TSteps ? DuplicateStepName<TName> : unknown);

type WithStep<TSteps, TName extends string, TOutput> = Simplify<TSteps & { readonly [P in TName]: TOutput }>;

type WithSpec<TSpecs, TName extends string, TSpec> = TSpecs & { readonly [P in TName]: TSpec };

/** Phantom types carried by a workflow; read them with the `Workflow*` helper types. */
export interface WorkflowTypes<TInputSchema extends z.ZodType, TSteps, TSpecs> {
  readonly input: z.output<TInputSchema>;
  readonly startInput: z.input<TInputSchema>;
  readonly steps: TSteps;
  readonly specs: TSpecs;
}

/**
 * A named, versioned workflow: an input schema and an ordered list of steps. Immutable: every
 * `step` / `transactional` / `external` call returns a new workflow with one more step, whose
 * key and handler can see only the steps declared before it.
 *
 * @example
 * export const refund = workflow('refund', { version: 1, input: z.object({ orderId: z.string() }) })
 *   .step('load', { output: z.object({ amountCents: z.number() }) })
 *   .external('refund', {
 *     output: z.object({ refundId: z.string() }),
 *     key: ({ input }) => `refund:${input.orderId}`,
 *     idempotentByKey: true,
 *   });
 */
export class Workflow<
  TName extends string,
  TInputSchema extends z.ZodType,
  TSteps extends object = {},
  TSpecs extends object = {},
> {
  declare readonly '~types'?: WorkflowTypes<TInputSchema, TSteps, TSpecs>;

  readonly name: TName;
  readonly version: number;
  readonly input: TInputSchema;
  readonly steps: readonly StepDefinition[];

  /** @internal use {@link workflow}. */
  constructor(name: TName, version: number, input: TInputSchema, steps: readonly StepDefinition[]) {
    this.name = name;
    this.version = version;
    this.input = input;
    this.steps = steps;
    Object.freeze(this);
  }

  /** A computing or reading step: no key; its output is checkpointed and never recomputed. */
  step<TName2 extends string, TOutput extends z.ZodType>(
    name: NewStepName<TName2, TSteps>,
    config: PlainStepConfig<TOutput>,
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, z.output<TOutput>>,
    WithSpec<TSpecs, TName2, StepSpec<'step', z.output<TOutput>, TSteps, false>>
  > {
    return this.add(name, 'step', config, undefined);
  }

  /** A step that writes to the same database, in one commit with its ledger row and the transition. */
  transactional<TName2 extends string, TOutput extends z.ZodType>(
    name: NewStepName<TName2, TSteps>,
    config: TransactionalStepConfig<z.output<TInputSchema>, TSteps, TOutput>,
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, z.output<TOutput>>,
    WithSpec<TSpecs, TName2, StepSpec<'transactional', z.output<TOutput>, TSteps, false>>
  > {
    return this.add(name, 'transactional', config, config.key);
  }

  /** A step that calls another system: intent commit, `perform(key)`, result commit. */
  external<TName2 extends string, TOutput extends z.ZodType, TIdempotent extends boolean = false>(
    name: NewStepName<TName2, TSteps>,
    config: ExternalStepConfig<z.output<TInputSchema>, TSteps, TOutput, TIdempotent>,
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, z.output<TOutput>>,
    WithSpec<TSpecs, TName2, StepSpec<'external', z.output<TOutput>, TSteps, TIdempotent>>
  > {
    return this.add(name, 'external', config, config.key);
  }

  private add<TNext extends Workflow<TName, TInputSchema, object, object>>(
    name: string,
    kind: StepKind,
    config: CommonStepConfig<z.ZodType> & {
      readonly request?: unknown;
      readonly idempotentByKey?: boolean;
      readonly performTimeoutMs?: number;
      readonly timeoutMs?: number;
    },
    key: unknown,
  ): TNext {
    const where = `workflow "${this.name}" v${this.version}, step "${name}"`;
    if (!STEP_NAME.test(name)) {
      throw new TypeError(`Invalid step name in ${where}: use letters, digits and _ (max 63), starting with a letter.`);
    }
    if (this.steps.some((s) => s.name === name)) {
      throw new TypeError(`Duplicate step name in ${where}: step names must be unique within a workflow.`);
    }
    if (kind !== 'step' && typeof key !== 'function') {
      throw new TypeError(
        `Missing key in ${where}: ${kind} steps need key: ({ input, steps }) => string (LF001).`,
      );
    }
    const performTimeoutMs = config.performTimeoutMs ?? DEFAULT_PERFORM_TIMEOUT_MS;
    if (!(performTimeoutMs > 0)) {
      throw new TypeError(`Invalid performTimeoutMs in ${where}: must be > 0 (got ${performTimeoutMs}).`);
    }
    const handlerTimeoutMs = config.timeoutMs ?? (kind === 'transactional' ? DEFAULT_TRANSACTIONAL_TIMEOUT_MS : DEFAULT_STEP_TIMEOUT_MS);
    if (!(handlerTimeoutMs > 0)) {
      throw new TypeError(`Invalid timeoutMs in ${where}: must be > 0 (got ${handlerTimeoutMs}).`);
    }
    const definition: StepDefinition = {
      name,
      kind,
      position: this.steps.length,
      output: config.output,
      retry: resolveRetryPolicy(where, config.retry),
      idempotentByKey: kind === 'external' && config.idempotentByKey === true,
      performTimeoutMs,
      timeoutMs: kind === 'external' ? performTimeoutMs : handlerTimeoutMs,
      ...(typeof key === 'function' ? { key: key as StepDefinition['key'] } : {}),
      ...(typeof config.request === 'function' ? { request: config.request as StepDefinition['request'] } : {}),
    };
    return new Workflow(this.name, this.version, this.input, [...this.steps, Object.freeze(definition)]) as TNext;
  }
}

export interface WorkflowOptions<TInputSchema extends z.ZodType> {
  /** Bump whenever the steps change; runs stay pinned to the version they started with (LF007). */
  readonly version: number;
  /** Schema of the start input; `start()` rejects anything it does not accept before writing. */
  readonly input: TInputSchema;
}

/**
 * Declares a workflow. Chain `.step`, `.transactional` and `.external` to add steps in order.
 *
 * @example
 * export const onboarding = workflow('user-onboarding', { version: 1, input: z.object({ userId: z.string() }) })
 *   .transactional('createAccount', {
 *     output: z.object({ accountId: z.string() }),
 *     key: ({ input }) => `account:${input.userId}`,
 *   });
 */
export function workflow<TName extends string, TInputSchema extends z.ZodType>(
  name: TName,
  options: WorkflowOptions<TInputSchema>,
): Workflow<TName, TInputSchema> {
  if (!WORKFLOW_NAME.test(name)) {
    throw new TypeError(
      `Invalid workflow name "${name}": use lower-case letters, digits and -, starting with a letter (max 63).`,
    );
  }
  if (!Number.isInteger(options.version) || options.version < 1) {
    throw new TypeError(`Invalid version for workflow "${name}": must be an integer >= 1 (got ${options.version}).`);
  }
  return new Workflow(name, options.version, options.input, []);
}

// ---- Reading a workflow's phantom types -------------------------------------------------------

/** Any workflow, whatever its input and steps. */
export type AnyWorkflow = Workflow<string, z.ZodType, object, object>;

type TypesOf<W extends AnyWorkflow> = NonNullable<W['~types']>;

/** The validated input handlers and keys see. */
export type WorkflowInput<W extends AnyWorkflow> = TypesOf<W>['input'];
/** What `start()` accepts (before schema defaults and transforms). */
export type WorkflowStartInput<W extends AnyWorkflow> = TypesOf<W>['startInput'];
/** Outputs of all steps, by name: the result of a completed run. */
export type WorkflowOutput<W extends AnyWorkflow> = TypesOf<W>['steps'];
export type WorkflowStepName<W extends AnyWorkflow> = keyof TypesOf<W>['specs'] & string;
export type WorkflowStepSpec<W extends AnyWorkflow, N extends WorkflowStepName<W>> = TypesOf<W>['specs'][N];
