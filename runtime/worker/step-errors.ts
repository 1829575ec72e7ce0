import { LedgerflowError, ValidationError } from '../errors.js';
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
    /** `perform`: the external call itself threw, in this attempt (a refusal may release its intent). */
    readonly phase: 'perform' | 'other' = 'other',
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

/** @internal a commit's outcome is unknown; the driver re-reads the run before going on. */
export class ResyncNeeded extends Error {
  override readonly name = 'ResyncNeeded';
}

/** `perform` did not settle within the step's `performTimeoutMs`; its outcome is unknown. */
export class PerformTimeoutError extends Error {
  override readonly name = 'PerformTimeoutError';
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

export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const stack = error.stack?.split('\n').slice(0, STACK_LINES).join('\n');
  return {
    name: error.name,
    message: error.message,
    ...(error instanceof LedgerflowError ? { code: error.code } : {}),
    ...(error instanceof ValidationError ? { issues: [...error.issues] } : {}),
    ...(stack !== undefined ? { stack } : {}),
  };
}

/** Runs user code; anything it throws becomes a {@link StepFailure}. */
export async function userCode<T>(fn: () => T | Promise<T>, phase: StepFailure['phase'] = 'other'): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw error instanceof StepFailure ? error : new StepFailure(error, phase);
  }
}

/**
 * True when an error from the database layer leaves a commit's outcome unknown: the connection
 * broke (class 08), the server shut down or restarted (57P0x), or the socket died before any
 * SQLSTATE arrived. A statement that failed with another SQLSTATE definitely did not commit.
 */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const sqlState = sqlStateOf(error);
  if (sqlState !== undefined) return sqlState.startsWith('08') || sqlState.startsWith('57P');
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return true; // ECONNRESET, ECONNREFUSED, EPIPE …
  return /connection|terminat|socket|not queryable/i.test(error.message);
}
