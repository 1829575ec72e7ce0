import { LedgerflowError, NonRetryableError, ValidationError } from '../errors.js';
import { sqlStateOf } from '../store/sqlstate.js';
import type { Json } from '../store/tables.js';

/**
 * How the worker tells apart the three kinds of trouble a step can meet:
 * - {@link StepFailure}: user code (key, request, handler, perform, reconcile) or validation
 *   failed — a failed attempt, retried per policy;
 * - `LeaseLostError` (runtime/errors.ts): the fencing token moved — stop, commit nothing;
 * - {@link ResyncNeeded}: a commit's outcome is unknown (connection lost) — re-read the run
 *   from the database before doing anything else, never assume failure.
 */
export class StepFailure extends Error {
  override readonly name = 'StepFailure';
  constructor(
    override readonly cause: unknown,
    /** Where in an `external` attempt it failed; decides what becomes of the attempt's intent. */
    readonly phase: FailurePhase = 'other',
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

/**
 * Where an `external` step's attempt failed, relative to its call to the provider:
 * - `before-perform`: the attempt owns an intent but never called `perform` — the effect
 *   certainly did not happen, so the failure commit releases the intent;
 * - `perform`: `perform` threw or timed out — the outcome is UNKNOWN (the request may have been
 *   sent and may still be applied), unless it threw a {@link NotAppliedError}; the intent stays
 *   open until its horizon and is then reconciled (or, with `idempotentByKey`, retried by key);
 * - `after-perform`: `perform` returned (the provider answered), then something failed before
 *   the result commit — the effect happened; the intent is due for reconciliation at once;
 * - `other`: not an external call (keys, handlers of the other kinds, commits).
 */
export type FailurePhase = 'before-perform' | 'perform' | 'after-perform' | 'other';

/** @internal a commit's outcome is unknown; the driver re-reads the run before going on. */
export class ResyncNeeded extends Error {
  override readonly name = 'ResyncNeeded';
}

/**
 * True when PostgreSQL refused a statement for want of resources (SQLSTATE class 53: too many
 * connections, disk full, out of memory): it did not run. Also `isConnectionError` (store/connection-errors.ts); the
 * difference is that the outcome is known, so the same commit can simply be tried again later.
 */
export function isResourceRefusal(error: unknown): boolean {
  return sqlStateOf(error)?.startsWith('53') === true;
}

/** `perform` did not settle within the step's `performTimeoutMs`; its outcome is unknown. */
export class PerformTimeoutError extends Error {
  override readonly name = 'PerformTimeoutError';
}

/** A `step` or `transactional` handler did not finish within the step's `timeoutMs`; retried per policy. */
export class HandlerTimeoutError extends Error {
  override readonly name = 'HandlerTimeoutError';
}

/** The JSON an attempt's and a run's `error` column holds. */
export interface SerializedError {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
  readonly issues?: string[];
  readonly stack?: string;
  readonly [extra: string]: Json | undefined;
}

const STACK_LINES = 12;

/**
 * An error as JSON that PostgreSQL will always store: jsonb refuses U+0000 and lone UTF-16
 * surrogates, and a failure that cannot be recorded would look like a crash (the run would
 * wait out its lease and the real error would be lost). Such characters are escaped.
 */
export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { name: 'Error', message: recordableText(String(error)) };
  const stack = error.stack?.split('\n').slice(0, STACK_LINES).join('\n');
  return {
    name: recordableText(String(error.name)),
    message: recordableText(String(error.message)),
    ...(error instanceof LedgerflowError ? { code: error.code } : {}),
    ...(error instanceof ValidationError ? { issues: error.issues.map(recordableText) } : {}),
    ...(stack !== undefined ? { stack: recordableText(stack) } : {}),
  };
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what it looks for (jsonb cannot store it).
const UNRECORDABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Text with U+0000 and lone surrogates written as `\\u0000`-style escapes (jsonb accepts the rest). */
export function recordableText(text: string): string {
  return text.replace(UNRECORDABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * Runs a function the runtime evaluates for a step — a key, a condition, a match, a partition key,
 * a sleep's time, a fan-out's items and child input — which must be synchronous: codegen checks
 * it as a pure function of the input and earlier outputs (LF002), and the DSL types its result
 * as a plain value. One that returns a Promise (an `async` function) fails the attempt with a
 * non-retryable error: awaiting it would let it read what changes between retries, and every
 * retry would return a Promise again. `subject` names it: `The key function of step "charge"`.
 * Anything it throws becomes a {@link StepFailure}, as with {@link userCode}.
 */
export function evaluateStepFunction<T>(fn: () => T, subject: string): T {
  let value: T;
  try {
    value = fn();
  } catch (error) {
    throw error instanceof StepFailure ? error : new StepFailure(error);
  }
  if (isThenable(value)) {
    // Its eventual rejection is not this attempt's concern any more; keep it from going unhandled.
    Promise.resolve(value).catch(() => undefined);
    throw new StepFailure(
      new NonRetryableError(
        `${subject} returned a Promise (is it async?): it must compute its value synchronously from the input and earlier steps' outputs; ` +
          'load what it needs in an earlier step and read that output from steps.',
      ),
    );
  }
  return value;
}

function isThenable(value: unknown): boolean {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** Runs user code; anything it throws becomes a {@link StepFailure}. */
export async function userCode<T>(fn: () => T | Promise<T>, phase: FailurePhase = 'other'): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw error instanceof StepFailure ? error : new StepFailure(error, phase);
  }
}
