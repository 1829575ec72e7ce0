import { z } from 'zod';
import { checkOptions } from './option-checks.js';
import type { AnyEvent, EventPayload } from './event.js';
import type { QueueDefinition } from './queue.js';
import { STEP_NAME, WORKFLOW_NAME } from './names.js';
import { resolveRetryPolicy, type ResolvedRetryPolicy, type RetryPolicy } from './retry-policy.js';
import type { StepKind } from './step-kind.js';
import {
  compensationConfigSchema,
  DEFAULT_PERFORM_TIMEOUT_MS,
  DEFAULT_STEP_TIMEOUT_MS,
  DEFAULT_TRANSACTIONAL_TIMEOUT_MS,
  forEachConfigSchema,
  invalidIn,
  queueUseSchema,
  stepConfigSchema,
  waitForConfigSchema,
  workflowOptionsSchema,
} from './step-options.js';
import type {
  CompensationConfig,
  ConditionConfig,
  ExternalCompensationConfig,
  ExternalStepConfig,
  ItemContext,
  KeyContext,
  KeyFn,
  PlainStepConfig,
  QueueUse,
  SleepForConfig,
  SleepOutput,
  SleepUntilConfig,
  TransactionalCompensationConfig,
  TransactionalStepConfig,
  WaitForConfig,
  WaitForOutput,
} from './step-configs.js';
import type {
  MaybeSkipped,
  NewStepName,
  StepSpec,
  WithCompensationSpec,
  WithSpec,
  WithStep,
  WorkflowTypes,
} from './workflow-types.js';

/*
 * The builder: `workflow(name, options)` and the immutable `Workflow` whose step methods each
 * return a new workflow with one more step; what it builds (`StepDefinition`, the run-time
 * description of a step the worker and codegen's model read); the configs of `.child` and
 * `.forEach`, which name a child workflow; and the `Workflow*` types that read a workflow's phantom
 * types. The other step methods' configs are in step-configs.ts, the phantom types' machinery in
 * workflow-types.ts, what options may be and default to in step-options.ts.
 *
 * Long because each of the seven step methods spells out its full phantom-type signature, and the
 * types here name the class (a `StepDefinition`'s fan-out names a workflow, the child configs and
 * the `Workflow*` readers take one): moved out, they would import it back, a cycle.
 */

/** How a step or a workflow uses a queue, as the runtime sees it. */
export interface QueueUseDefinition {
  readonly queue: QueueDefinition;
  partitionKey?(ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>): string;
}

export interface ChildConfig<TInput, TPrior, TChild extends AnyWorkflow, TWhen extends boolean>
  extends ConditionConfig<TInput, TPrior, TWhen> {
  /** The child's start input (validated with the child's schema). */
  readonly input: (ctx: KeyContext<TInput, TPrior>) => WorkflowStartInput<TChild>;
  /** The child run's dedupe key: it is started once per key, whatever crashes in between (checked like a key). */
  readonly key: KeyFn<TInput, TPrior>;
  readonly retry?: RetryPolicy;
}

export interface ForEachConfig<TInput, TPrior, TItem, TChild extends AnyWorkflow, TWhen extends boolean>
  extends ConditionConfig<TInput, TPrior, TWhen> {
  /** The list to fan out over (a pure function of `input` and earlier `steps`). */
  readonly items: (ctx: KeyContext<TInput, TPrior>) => readonly TItem[];
  /** Each child's dedupe key; must read `item` (LF013) so that two items cannot share a child. */
  readonly key: (ctx: ItemContext<TItem, TInput, TPrior>) => string;
  readonly workflow: TChild;
  /** Each child's start input. */
  readonly input: (ctx: ItemContext<TItem, TInput, TPrior>) => WorkflowStartInput<TChild>;
  /** At most this many children unfinished at once; default: all of them. */
  readonly concurrency?: number;
  readonly retry?: RetryPolicy;
}

/** How a `child` or `forEach` step starts its children; the `child` kind is a list of one. */
export interface FanOutDefinition {
  readonly workflow: AnyWorkflow;
  /** `forEach` only; a `child` step has one item, `null`. */
  items?(ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>): readonly unknown[];
  key(ctx: ItemContext<unknown, unknown, Readonly<Record<string, unknown>>>): string;
  input(ctx: ItemContext<unknown, unknown, Readonly<Record<string, unknown>>>): unknown;
  /** At most this many children unfinished at once (`Infinity`: no limit). */
  readonly concurrency: number;
}

/** How a `sleep` step computes its wake-up time. */
export type SleepDefinition =
  | { for(ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>): number }
  | { until(ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>): Date | string };

export interface WaitDefinition {
  readonly event: AnyEvent;
  /** Absent: the step waits for a signal to its own run (the correlation key is the run id). */
  match?(ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>): string;
  readonly timeoutMs: number | undefined;
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
  /** The step's condition, if it has one. */
  when?(ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>): boolean;
  /** `sleep` only. */
  readonly sleep?: SleepDefinition;
  /** `waitFor` only. */
  readonly wait?: WaitDefinition;
  /** `child` and `forEach` only. */
  readonly fanOut?: FanOutDefinition;
  /** `step`, `transactional` and `external` only: each attempt holds a slot of this queue. */
  readonly queue?: QueueUseDefinition;
  /** `transactional` and `external` only: the compensation that undoes this step (see {@link Workflow.compensations}). */
  readonly compensation?: StepDefinition;
  /** A compensation only: the name of the step whose effect it undoes. */
  readonly compensates?: string;
}

/** The output a workflow's run hands a parent `child`/`forEach` step: its last step's output. */
type LastOutput<W extends AnyWorkflow> = NonNullable<W['~types']>['last'];

/**
 * A named, versioned workflow: an input schema and an ordered list of steps. Immutable: every
 * step method returns a new workflow with one more step, whose key, condition and handler can
 * see only the steps declared before it.
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
  TLast = undefined,
> {
  declare readonly '~types'?: WorkflowTypes<TInputSchema, TSteps, TSpecs, TLast>;

  readonly name: TName;
  readonly version: number;
  readonly input: TInputSchema;
  readonly steps: readonly StepDefinition[];
  /** A run still unfinished this long after it started is cancelled (children included). */
  readonly timeoutMs: number | undefined;
  /** Each run holds a slot of this queue from its first step until it finishes. */
  readonly queue: QueueUseDefinition | undefined;
  /**
   * The steps' compensations in the order they run — the last declared step's first — at
   * positions after the steps (`steps.length`, …), each with `compensates` naming its step.
   */
  readonly compensations: readonly StepDefinition[];
  /** Whether `cancel(runId)` compensates when it does not say (`compensateOnCancel`; default false). */
  readonly compensateOnCancel: boolean;

  /** @internal use {@link workflow}. */
  constructor(
    name: TName,
    version: number,
    input: TInputSchema,
    steps: readonly StepDefinition[],
    options: {
      readonly timeoutMs?: number | undefined;
      readonly queue?: QueueUseDefinition | undefined;
      readonly compensateOnCancel?: boolean | undefined;
    } = {},
  ) {
    this.name = name;
    this.version = version;
    this.input = input;
    this.steps = steps;
    this.timeoutMs = options.timeoutMs;
    this.queue = options.queue;
    this.compensateOnCancel = options.compensateOnCancel === true;
    this.compensations = steps
      .filter((step) => step.compensation !== undefined)
      .reverse()
      .map((step, i) => Object.freeze({ ...step.compensation!, position: steps.length + i, compensates: step.name }));
    Object.freeze(this);
  }

  /** A computing or reading step: no key; its output is checkpointed and never recomputed. */
  step<TName2 extends string, TOutput extends z.ZodType, TWhen extends boolean = never>(
    name: NewStepName<TName2, TSteps>,
    config: PlainStepConfig<TOutput, z.output<TInputSchema>, TSteps> &
      ConditionConfig<z.output<TInputSchema>, TSteps, TWhen>,
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, MaybeSkipped<z.output<TOutput>, TWhen>>,
    WithSpec<TSpecs, TName2, StepSpec<'step', z.output<TOutput>, TSteps, false>>,
    MaybeSkipped<z.output<TOutput>, TWhen>
  > {
    return this.add(name, 'step', config, { key: undefined });
  }

  /** A step that writes to the same database, in one commit with its ledger row and the transition. */
  transactional<
    TName2 extends string,
    TOutput extends z.ZodType,
    TWhen extends boolean = never,
    TCompName extends string = never,
    TCompOutput extends z.ZodType = z.ZodNever,
  >(
    name: NewStepName<TName2, TSteps>,
    config: TransactionalStepConfig<z.output<TInputSchema>, TSteps, TOutput> &
      ConditionConfig<z.output<TInputSchema>, TSteps, TWhen> & {
        /** Undoes this step's writes (a `ctx.tx` write) when the run fails for good or is cancelled with `compensate`. */
        readonly compensate?: TransactionalCompensationConfig<
          TCompName,
          z.output<TInputSchema>,
          WithStep<TSteps, TName2, z.output<TOutput>>,
          TCompOutput
        >;
      },
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, MaybeSkipped<z.output<TOutput>, TWhen>>,
    WithCompensationSpec<
      WithSpec<TSpecs, TName2, StepSpec<'transactional', z.output<TOutput>, TSteps, false>>,
      TCompName,
      StepSpec<'transactional', z.output<TCompOutput>, WithStep<TSteps, TName2, z.output<TOutput>>, false>
    >,
    MaybeSkipped<z.output<TOutput>, TWhen>
  > {
    return this.add(name, 'transactional', config, { key: config.key });
  }

  /** A step that calls another system: intent commit, `perform(key)`, result commit. */
  external<
    TName2 extends string,
    TOutput extends z.ZodType,
    TIdempotent extends boolean = false,
    TWhen extends boolean = never,
    TCompName extends string = never,
    TCompOutput extends z.ZodType = z.ZodNever,
    TCompIdempotent extends boolean = false,
  >(
    name: NewStepName<TName2, TSteps>,
    config: ExternalStepConfig<z.output<TInputSchema>, TSteps, TOutput, TIdempotent> &
      ConditionConfig<z.output<TInputSchema>, TSteps, TWhen> & {
        /**
         * Undoes this step's effect (e.g. refunds a charge) when the run fails for good or is
         * cancelled with `compensate`: its own key and handler (`perform` / `reconcile`).
         *
         * @example
         * compensate: { name: 'refundCharge', key: ({ input }) => `refund:${input.orderId}`,
         *   output: z.object({ refundId: z.string() }), idempotentByKey: true }
         */
        readonly compensate?: ExternalCompensationConfig<
          TCompName,
          z.output<TInputSchema>,
          WithStep<TSteps, TName2, z.output<TOutput>>,
          TCompOutput,
          TCompIdempotent
        >;
      },
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, MaybeSkipped<z.output<TOutput>, TWhen>>,
    WithCompensationSpec<
      WithSpec<TSpecs, TName2, StepSpec<'external', z.output<TOutput>, TSteps, TIdempotent>>,
      TCompName,
      StepSpec<'external', z.output<TCompOutput>, WithStep<TSteps, TName2, z.output<TOutput>>, TCompIdempotent>
    >,
    MaybeSkipped<z.output<TOutput>, TWhen>
  > {
    return this.add(name, 'external', config, { key: config.key });
  }

  /**
   * Durable sleep. The wake-up time is computed once, on database time, when the run first
   * reaches the step, and never again; until then the run holds no lease and no worker slot.
   *
   * @example
   * .sleep('untilRenewal', { until: ({ input }) => input.renewsAt })
   */
  sleep<TName2 extends string, TWhen extends boolean = never>(
    name: NewStepName<TName2, TSteps>,
    config:
      | SleepForConfig<z.output<TInputSchema>, TSteps, TWhen>
      | SleepUntilConfig<z.output<TInputSchema>, TSteps, TWhen>,
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, MaybeSkipped<SleepOutput, TWhen>>,
    WithSpec<TSpecs, TName2, StepSpec<'sleep', SleepOutput, TSteps, false>>,
    MaybeSkipped<SleepOutput, TWhen>
  > {
    const where = this.where(name);
    const sleep: SleepDefinition | undefined =
      typeof config.for === 'function'
        ? { for: config.for as (ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>) => number }
        : typeof config.until === 'function'
          ? { until: config.until as (ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>) => Date | string }
          : undefined;
    if (sleep === undefined || (typeof config.for === 'function' && typeof config.until === 'function')) {
      throw new TypeError(
        `Invalid sleep in ${where}: give exactly one of for: ({ input, steps }) => ms or until: ({ input, steps }) => Date.`,
      );
    }
    return this.add(name, 'sleep', { output: SLEEP_OUTPUT, when: config.when }, { key: undefined, sleep });
  }

  /**
   * Waits for an event whose correlation key equals `match` (or, without `match`, for a signal
   * to this run), at most `timeoutMs`. An event sent before the run gets here is not lost; each
   * event is taken by one waiting step, once. On timeout the output says so.
   *
   * @example
   * .waitFor('settled', { event: paymentSettled, match: ({ input }) => input.orderId, timeoutMs: 86_400_000 })
   */
  waitFor<TName2 extends string, TEvent extends AnyEvent, TWhen extends boolean = never>(
    name: NewStepName<TName2, TSteps>,
    config: WaitForConfig<z.output<TInputSchema>, TSteps, TEvent, TWhen>,
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, MaybeSkipped<WaitForOutput<EventPayload<TEvent>>, TWhen>>,
    WithSpec<TSpecs, TName2, StepSpec<'waitFor', WaitForOutput<EventPayload<TEvent>>, TSteps, false>>,
    MaybeSkipped<WaitForOutput<EventPayload<TEvent>>, TWhen>
  > {
    const where = this.where(name);
    const event = config.event as AnyEvent | undefined;
    if (event === undefined || typeof event.name !== 'string' || typeof event.payload?.safeParse !== 'function') {
      throw new TypeError(`Invalid waitFor in ${where}: event must be declared with event('name', schema).`);
    }
    checkOptions(waitForConfigSchema, config, invalidIn(where));
    const wait: WaitDefinition = {
      event,
      timeoutMs: config.timeoutMs,
      ...(config.match !== undefined ? { match: config.match as NonNullable<WaitDefinition['match']> } : {}),
    };
    return this.add(
      name,
      'waitFor',
      { output: waitOutputSchema(event), retry: config.retry, when: config.when },
      { key: undefined, wait },
    );
  }

  /**
   * Starts `child` once (its dedupe key is `key`), waits for it and takes its last step's output.
   * A failed or cancelled child fails this step; cancelling this run cancels the child.
   *
   * @example
   * .child('ship', shipment, { key: ({ input }) => `ship:${input.orderId}`, input: ({ input }) => ({ orderId: input.orderId }) })
   */
  child<TName2 extends string, TChild extends AnyWorkflow, TWhen extends boolean = never>(
    name: NewStepName<TName2, TSteps>,
    child: TChild,
    config: ChildConfig<z.output<TInputSchema>, TSteps, TChild, TWhen>,
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, MaybeSkipped<LastOutput<TChild>, TWhen>>,
    WithSpec<TSpecs, TName2, StepSpec<'child', LastOutput<TChild>, TSteps, false>>,
    MaybeSkipped<LastOutput<TChild>, TWhen>
  > {
    this.checkChild(name, child);
    const key = config.key as unknown as KeyFn<unknown, Readonly<Record<string, unknown>>>;
    const input = config.input as unknown as (ctx: KeyContext<unknown, Readonly<Record<string, unknown>>>) => unknown;
    if (typeof input !== 'function')
      throw new TypeError(
        `Invalid child in ${this.where(name)}: input must be a function ({ input, steps }) => childInput.`,
      );
    const fanOut: FanOutDefinition = {
      workflow: child,
      key: (ctx) => key(ctx),
      input: (ctx) => input(ctx),
      concurrency: 1,
    };
    return this.add(
      name,
      'child',
      { output: z.unknown(), retry: config.retry, when: config.when },
      { key: config.key, fanOut },
    );
  }

  /**
   * Starts one `workflow` run per item, each once by its per-item `key`, at most `concurrency`
   * unfinished at a time, and resumes when all are done with their outputs in item order.
   *
   * @example
   * .forEach('batches', { items: ({ steps }) => steps.plan.batches, key: ({ input, item }) => `${input.jobId}:${item.from}`,
   *   workflow: copyBatch, input: ({ item }) => item, concurrency: 10 })
   */
  forEach<TName2 extends string, TItem, TChild extends AnyWorkflow, TWhen extends boolean = never>(
    name: NewStepName<TName2, TSteps>,
    config: ForEachConfig<z.output<TInputSchema>, TSteps, TItem, TChild, TWhen>,
  ): Workflow<
    TName,
    TInputSchema,
    WithStep<TSteps, TName2, MaybeSkipped<Array<LastOutput<TChild>>, TWhen>>,
    WithSpec<TSpecs, TName2, StepSpec<'forEach', Array<LastOutput<TChild>>, TSteps, false>>,
    MaybeSkipped<Array<LastOutput<TChild>>, TWhen>
  > {
    const where = this.where(name);
    this.checkChild(name, config.workflow);
    checkOptions(forEachConfigSchema, config, invalidIn(where));
    const concurrency = config.concurrency ?? Infinity;
    const fanOut: FanOutDefinition = {
      workflow: config.workflow,
      items: config.items as unknown as NonNullable<FanOutDefinition['items']>,
      key: config.key as unknown as FanOutDefinition['key'],
      input: config.input as unknown as FanOutDefinition['input'],
      concurrency,
    };
    return this.add(
      name,
      'forEach',
      { output: z.array(z.unknown()), retry: config.retry, when: config.when },
      { key: undefined, fanOut },
    );
  }

  private where(name: string): string {
    return `workflow "${this.name}" v${this.version}, step "${name}"`;
  }

  private checkChild(name: string, child: unknown): void {
    if (!(child instanceof Workflow)) {
      throw new TypeError(
        `Invalid child workflow in ${this.where(name)}: pass a workflow declared with workflow(...).`,
      );
    }
    if (child.name === this.name) {
      throw new TypeError(`Invalid child workflow in ${this.where(name)}: a workflow cannot start itself as a child.`);
    }
  }

  private add<TNext extends AnyWorkflow>(
    name: string,
    kind: StepKind,
    config: {
      readonly output: z.ZodType;
      /** Passed on from the step's config as is: absent and undefined both mean the default. */
      readonly retry?: RetryPolicy | undefined;
      readonly request?: unknown;
      readonly idempotentByKey?: boolean;
      readonly performTimeoutMs?: number;
      readonly timeoutMs?: number;
      readonly when?: unknown;
      readonly queue?: QueueUse<never>;
      readonly compensate?: unknown;
    },
    parts: {
      readonly key: unknown;
      readonly sleep?: SleepDefinition;
      readonly wait?: WaitDefinition;
      readonly fanOut?: FanOutDefinition;
    },
  ): TNext {
    const where = this.where(name);
    const { key } = parts;
    if (!STEP_NAME.test(name)) {
      throw new TypeError(`Invalid step name in ${where}: use letters, digits and _ (max 63), starting with a letter.`);
    }
    if (this.steps.some((s) => s.name === name)) {
      throw new TypeError(`Duplicate step name in ${where}: step names must be unique within a workflow.`);
    }
    if (this.steps.some((s) => s.compensation?.name === name)) {
      throw new TypeError(
        `Duplicate step name in ${where}: a compensation is already named "${name}"; names must be unique among steps and compensations.`,
      );
    }
    if ((kind === 'transactional' || kind === 'external' || kind === 'child') && typeof key !== 'function') {
      throw new TypeError(`Missing key in ${where}: ${kind} steps need key: ({ input, steps }) => string (LF001).`);
    }
    const performTimeoutMs = config.performTimeoutMs ?? DEFAULT_PERFORM_TIMEOUT_MS;
    const handlerTimeoutMs =
      config.timeoutMs ?? (kind === 'transactional' ? DEFAULT_TRANSACTIONAL_TIMEOUT_MS : DEFAULT_STEP_TIMEOUT_MS);
    checkOptions(
      stepConfigSchema,
      { when: config.when, performTimeoutMs, timeoutMs: handlerTimeoutMs },
      invalidIn(where),
    );
    const queue = config.queue === undefined ? undefined : queueUse(where, config.queue);
    if (queue !== undefined && this.queue?.queue.name === queue.queue.name) {
      throw new TypeError(
        `Invalid queue in ${where}: the workflow's runs already hold a slot of queue "${queue.queue.name}".`,
      );
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
      ...(typeof key === 'function' ? { key: key as NonNullable<StepDefinition['key']> } : {}),
      ...(typeof config.request === 'function'
        ? { request: config.request as NonNullable<StepDefinition['request']> }
        : {}),
      ...(typeof config.when === 'function' ? { when: config.when as NonNullable<StepDefinition['when']> } : {}),
      ...(parts.sleep !== undefined ? { sleep: Object.freeze(parts.sleep) } : {}),
      ...(parts.wait !== undefined ? { wait: Object.freeze(parts.wait) } : {}),
      ...(parts.fanOut !== undefined ? { fanOut: Object.freeze(parts.fanOut) } : {}),
      ...(queue !== undefined ? { queue } : {}),
    };
    const compensation = config.compensate === undefined ? undefined : this.compensation(name, kind, config.compensate);
    const step = compensation === undefined ? definition : { ...definition, compensation };
    return new Workflow(this.name, this.version, this.input, [...this.steps, Object.freeze(step)], {
      timeoutMs: this.timeoutMs,
      queue: this.queue,
      compensateOnCancel: this.compensateOnCancel,
    }) as unknown as TNext;
  }

  /** Checks a step's `compensate` and returns its definition (its position is set by the constructor). */
  private compensation(stepName: string, kind: StepKind, config: unknown): StepDefinition {
    const where = `${this.where(stepName)}, compensate`;
    if (kind !== 'transactional' && kind !== 'external') {
      throw new TypeError(`Invalid compensate in ${where}: only transactional and external steps have compensations.`);
    }
    const c = config as Partial<CompensationConfig<string, unknown, unknown, z.ZodType>> & {
      readonly idempotentByKey?: boolean;
      readonly performTimeoutMs?: number;
      readonly timeoutMs?: number;
    };
    if (typeof c !== 'object' || c === null)
      throw new TypeError(`Invalid compensate in ${where}: give { name, key, output }.`);
    const name = c.name;
    if (typeof name !== 'string' || !STEP_NAME.test(name)) {
      throw new TypeError(
        `Invalid compensation name in ${where}: use letters, digits and _ (max 63), starting with a letter.`,
      );
    }
    if (name === stepName || this.steps.some((s) => s.name === name || s.compensation?.name === name)) {
      throw new TypeError(
        `Duplicate compensation name "${name}" in ${where}: names must be unique among steps and compensations.`,
      );
    }
    if (typeof c.key !== 'function') {
      throw new TypeError(
        `Missing key in ${where}: a compensation needs key: ({ input, steps }) => string, different from the step's.`,
      );
    }
    if (typeof c.output?.safeParse !== 'function')
      throw new TypeError(`Invalid output in ${where}: give a zod schema.`);
    const performTimeoutMs = c.performTimeoutMs ?? DEFAULT_PERFORM_TIMEOUT_MS;
    const handlerTimeoutMs = c.timeoutMs ?? DEFAULT_TRANSACTIONAL_TIMEOUT_MS;
    checkOptions(
      compensationConfigSchema,
      { request: c.request, performTimeoutMs, timeoutMs: handlerTimeoutMs },
      invalidIn(where),
    );
    return {
      name,
      kind,
      position: -1,
      output: c.output,
      retry: resolveRetryPolicy(`${this.where(name)} (compensation of "${stepName}")`, c.retry),
      idempotentByKey: kind === 'external' && c.idempotentByKey === true,
      performTimeoutMs,
      timeoutMs: kind === 'external' ? performTimeoutMs : handlerTimeoutMs,
      key: c.key as NonNullable<StepDefinition['key']>,
      ...(typeof c.request === 'function' ? { request: c.request as NonNullable<StepDefinition['request']> } : {}),
    };
  }
}

const SLEEP_OUTPUT = z.object({ until: z.string() });

function queueUse(where: string, use: QueueUse<never>): QueueUseDefinition {
  const queue = use.queue as QueueDefinition | undefined;
  if (queue === undefined || typeof queue.name !== 'string' || typeof queue.limits !== 'object') {
    throw new TypeError(`Invalid queue in ${where}: declare it with queue('name', { ... }) and pass { queue }.`);
  }
  checkOptions(queueUseSchema, use, invalidIn(where));
  return Object.freeze({
    queue,
    ...(use.partitionKey !== undefined
      ? { partitionKey: use.partitionKey as unknown as NonNullable<QueueUseDefinition['partitionKey']> }
      : {}),
  });
}

function waitOutputSchema(event: AnyEvent): z.ZodType {
  return z.discriminatedUnion('status', [
    z.object({ status: z.literal('received'), payload: event.payload, eventId: z.string(), receivedAt: z.string() }),
    z.object({ status: z.literal('timeout'), timedOutAt: z.string() }),
  ]);
}

export interface WorkflowOptions<TInputSchema extends z.ZodType> {
  /** Bump whenever the steps change; runs stay pinned to the version they started with (LF007). */
  readonly version: number;
  /** Schema of the start input; `start()` rejects anything it does not accept before writing. */
  readonly input: TInputSchema;
  /**
   * A run still unfinished this long after it started is cancelled, with its children and
   * waits (a step already running finishes its attempt first). `start(..., { timeoutMs })` overrides it.
   */
  readonly timeoutMs?: number;
  /**
   * Each run holds a slot of this queue from its first step until it finishes (waits included):
   * e.g. `partition: { concurrency: 1 }` with `partitionKey: ({ input }) => input.customerId` runs
   * one workflow per customer at a time.
   */
  readonly queue?: QueueUse<{ readonly input: z.output<TInputSchema> }>;
  /**
   * Whether `cancel(runId)` undoes the run's recorded effects (runs its steps' compensations)
   * when the cancel does not say; default false. A run that fails for good always compensates.
   */
  readonly compensateOnCancel?: boolean;
}

/**
 * Declares a workflow. Chain step methods (`.step`, `.transactional`, `.external`, `.sleep`,
 * `.waitFor`, `.child`, `.forEach`) to add steps in order.
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
  checkOptions(
    workflowOptionsSchema,
    options,
    (_lines, [first]) => new TypeError(`Invalid ${first!.name} for workflow "${name}": ${first!.says}.`),
  );
  const where = `workflow "${name}" v${options.version}`;
  return new Workflow(name, options.version, options.input, [], {
    timeoutMs: options.timeoutMs,
    queue: options.queue === undefined ? undefined : queueUse(where, options.queue as QueueUse<never>),
    compensateOnCancel: options.compensateOnCancel,
  });
}

// ---- Reading a workflow's phantom types -------------------------------------------------------

/** Any workflow, whatever its input and steps. */
export type AnyWorkflow = Workflow<string, z.ZodType, object, object, unknown>;

type TypesOf<W extends AnyWorkflow> = NonNullable<W['~types']>;

/** The validated input handlers and keys see. */
export type WorkflowInput<W extends AnyWorkflow> = TypesOf<W>['input'];
/** What `start()` accepts (before schema defaults and transforms). */
export type WorkflowStartInput<W extends AnyWorkflow> = TypesOf<W>['startInput'];
/** Outputs of all steps, by name: the result of a completed run. */
export type WorkflowOutput<W extends AnyWorkflow> = TypesOf<W>['steps'];
export type WorkflowStepName<W extends AnyWorkflow> = keyof TypesOf<W>['specs'] & string;
export type WorkflowStepSpec<W extends AnyWorkflow, N extends WorkflowStepName<W>> = TypesOf<W>['specs'][N];
/** The output a `child` step receives from a run of `W`: its last step's output. */
export type WorkflowResult<W extends AnyWorkflow> = TypesOf<W>['last'];
