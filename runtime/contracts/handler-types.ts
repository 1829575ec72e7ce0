import type { Kysely, Transaction } from 'kysely';
import type { StepSpec } from '../../dsl/workflow-types.js';
import type { Recorded } from './recorded.js';

/** What every handler sees. `signal` aborts when the worker loses the lease or shuts down. */
export interface StepContext<TInput, TPrior> {
  readonly runId: string;
  readonly workflowName: string;
  readonly stepName: string;
  /** 1 for the first attempt of this step in this run. */
  readonly attempt: number;
  readonly input: TInput;
  /** Checkpointed outputs of the steps declared before this one. */
  readonly steps: TPrior;
  readonly signal: AbortSignal;
}

/**
 * What a `step` handler may do with the database: read. Every statement runs in its own
 * `READ ONLY` transaction, so a write fails at run time too (a `step` runs at least once: a write
 * there could happen twice; write in a `transactional` step, through `ctx.tx`).
 */
export type ReadOnlyDatabase<TDatabase> = Pick<
  Kysely<TDatabase>,
  'selectFrom' | 'selectNoFrom' | 'with' | 'withRecursive' | 'fn' | 'dynamic' | 'getExecutor'
>;

export interface PlainStepContext<TInput, TPrior, TDatabase> extends StepContext<TInput, TPrior> {
  /**
   * Read-only access to the run's own database (the store's connection: works on PostgreSQL and
   * on the embedded PGlite alike).
   *
   * @example
   * const order = await ctx.db.selectFrom('shop.order').selectAll().where('id', '=', ctx.input.orderId).executeTakeFirstOrThrow();
   */
  readonly db: ReadOnlyDatabase<TDatabase>;
}

/** `step`: compute or read (through `ctx.db`); return the output. */
export type StepHandler<TInput, TPrior, TOutput, TDatabase = {}> = (
  ctx: PlainStepContext<TInput, TPrior, TDatabase>,
) => Promise<TOutput> | TOutput;

export interface TransactionalContext<TInput, TPrior, TOutput, TDatabase> extends StepContext<TInput, TPrior> {
  readonly key: string;
  /** The run's fenced transaction. Write through it, and only it: it commits with the ledger row. */
  readonly tx: Transaction<TDatabase>;
  /** Wraps the output for the ledger; the handler must return what this returns. */
  record(output: TOutput): Recorded<TOutput>;
}

/** `transactional`: write through `ctx.tx`, then `return ctx.record(output)`. */
export type TransactionalHandler<TInput, TPrior, TOutput, TDatabase> = (
  ctx: TransactionalContext<TInput, TPrior, TOutput, TDatabase>,
) => Promise<Recorded<TOutput>>;

export interface PerformContext<TInput, TPrior> extends StepContext<TInput, TPrior> {
  /** Send this to the provider as its idempotency key (or store it with the effect for lookup). */
  readonly key: string;
}

export interface IntentInfo {
  readonly attempt: number;
  readonly intentAt: Date;
  readonly requestHash: string;
}

export interface ReconcileContext<TInput, TPrior> extends PerformContext<TInput, TPrior> {
  /** The intent a crashed or timed-out attempt left behind. */
  readonly intent: IntentInfo;
}

/**
 * What a lookup by key found at the provider: the effect happened (`found`, with the output the
 * step would have returned), it did not (`not_found`: safe to perform again with the same key),
 * or nobody can tell (`unknown`: the run parks in `needs_reconciliation` for a human).
 */
export type ReconcileOutcome<TOutput> =
  | { readonly status: 'found'; readonly output: TOutput }
  | { readonly status: 'not_found' }
  | { readonly status: 'unknown'; readonly reason: string };

/** `external` without provider dedupe: a crash after `perform` is resolved by `reconcile`. */
export interface ReconcilingExternalHandler<TInput, TPrior, TOutput> {
  perform(ctx: PerformContext<TInput, TPrior>): Promise<TOutput>;
  reconcile(ctx: ReconcileContext<TInput, TPrior>): Promise<ReconcileOutcome<TOutput>>;
}

/** `external` with `idempotentByKey: true`: the provider dedupes, so a retry reuses the key. */
export interface IdempotentExternalHandler<TInput, TPrior, TOutput> {
  perform(ctx: PerformContext<TInput, TPrior>): Promise<TOutput>;
  reconcile?(ctx: ReconcileContext<TInput, TPrior>): Promise<ReconcileOutcome<TOutput>>;
}

/** The handler contract one declared step demands, by kind. */
export type HandlerFor<TSpec, TInput, TDatabase> =
  TSpec extends StepSpec<'step', infer O, infer P, boolean>
    ? StepHandler<TInput, P, O, TDatabase>
    : TSpec extends StepSpec<'transactional', infer O, infer P, boolean>
      ? TransactionalHandler<TInput, P, O, TDatabase>
      : TSpec extends StepSpec<'external', infer O, infer P, true>
        ? IdempotentExternalHandler<TInput, P, O>
        : TSpec extends StepSpec<'external', infer O, infer P, boolean>
          ? ReconcilingExternalHandler<TInput, P, O>
          : never;

export const found = <TOutput>(output: TOutput): ReconcileOutcome<TOutput> => ({ status: 'found', output });
export const notFound = (): ReconcileOutcome<never> => ({ status: 'not_found' });
export const unknownOutcome = (reason: string): ReconcileOutcome<never> => ({ status: 'unknown', reason });
