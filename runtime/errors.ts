import type { PrunedRun } from './retention/pruned-run.js';
import { findSqlState, missingLedgerflowObject, SQLSTATE } from './store/sqlstate.js';

/**
 * Errors a user can act on. Each carries a stable `code`; the CLI prints `message` without a
 * stack for these and exits non-zero.
 */
export abstract class LedgerflowError extends Error {
  abstract readonly code: string;
}

/** Start input (or a step output) rejected by its schema. Nothing was written. */
export class ValidationError extends LedgerflowError {
  override readonly name = 'ValidationError';
  readonly code = 'validation';
  constructor(
    message: string,
    /** `path: message` per problem, e.g. `amountCents: Expected number, received string`. */
    readonly issues: readonly string[],
  ) {
    super(message);
  }
}

/** A workflow name (or version) that is not registered with this client/worker or not migrated. */
export class UnknownWorkflowError extends LedgerflowError {
  override readonly name = 'UnknownWorkflowError';
  readonly code = 'unknown_workflow';
}

/** The ledger already holds something incompatible: another key for the step, or another request under the key. */
export class ConflictError extends LedgerflowError {
  override readonly name = 'ConflictError';
  readonly code = 'conflict';
}

/** A run id / dedupe key reused with a different workflow or input. */
export class DuplicateRunError extends LedgerflowError {
  override readonly name = 'DuplicateRunError';
  readonly code = 'duplicate_run';
}

/** An event dedupe key reused for another event (another correlation key or payload). */
export class DuplicateEventError extends LedgerflowError {
  override readonly name = 'DuplicateEventError';
  readonly code = 'duplicate_event';
}

export class RunNotFoundError extends LedgerflowError {
  override readonly name = 'RunNotFoundError';
  readonly code = 'run_not_found';
}

/**
 * The run finished and was pruned (`ledgerflow prune`): its state, attempts and ledger rows are
 * gone; its identity and recorded effects are kept in the archive, summarized in `run`.
 */
export class RunPrunedError extends LedgerflowError {
  override readonly name = 'RunPrunedError';
  readonly code = 'run_pruned';
  constructor(
    message: string,
    readonly run: PrunedRun,
  ) {
    super(message);
  }
}

/** No schedule of that name is registered in this database. */
export class ScheduleNotFoundError extends LedgerflowError {
  override readonly name = 'ScheduleNotFoundError';
  readonly code = 'schedule_not_found';
}

/** No queue of that name is registered in this database. */
export class QueueNotFoundError extends LedgerflowError {
  override readonly name = 'QueueNotFoundError';
  readonly code = 'queue_not_found';
}

/** The embedded PGlite directory is open in another process (PGlite is one process at a time). */
export class StoreLockedError extends LedgerflowError {
  override readonly name = 'StoreLockedError';
  readonly code = 'store_locked';
}

/** `waitForRun` gave up before the run settled; the run itself is unaffected and goes on. */
export class WaitTimeoutError extends LedgerflowError {
  override readonly name = 'WaitTimeoutError';
  readonly code = 'wait_timeout';
}

/** What a size limit applies to (`ledgerflow limits`); error records are truncated instead. */
export type PayloadKind = 'run input' | 'step output' | 'event payload';

/**
 * A run input, step output or event payload is larger than its limit (`ledgerflow limits`,
 * stored in the database). Refused before anything was sent to the database; a step whose
 * output is too large fails without further attempts.
 *
 * @example
 * // The run input of workflow "import" v1 is 104857602 bytes of JSON; the limit is 1048576
 * // (ledgerflow limits set --max-input-bytes <bytes>, or keep large data elsewhere and pass a reference).
 */
export class PayloadTooLargeError extends LedgerflowError {
  override readonly name = 'PayloadTooLargeError';
  readonly code = 'payload_too_large';
  readonly kind: PayloadKind;
  /** The size of the payload's JSON text in UTF-8 bytes. */
  readonly bytes: number;
  readonly limit: number;
  constructor(
    message: string,
    details: { readonly kind: PayloadKind; readonly bytes: number; readonly limit: number },
  ) {
    super(message);
    this.kind = details.kind;
    this.bytes = details.bytes;
    this.limit = details.limit;
  }
}

/** A migration file changed after it was applied, or the database is behind the code. */
export class MigrationError extends LedgerflowError {
  override readonly name = 'MigrationError';
  readonly code = 'migration';
}

/**
 * The MigrationError for a query that ran into a database without ledgerflow's tables (never
 * migrated, or missing a core migration), or `undefined` when `error` is something else. The one
 * place that turns the driver's "relation/schema/function … does not exist" into what to run.
 *
 * @example
 * try { … } catch (error) { throw notMigratedError(error) ?? error; }
 */
export function notMigratedError(error: unknown): MigrationError | undefined {
  const object = missingLedgerflowObject(error);
  if (object === undefined) return undefined;
  return new MigrationError(
    object === 'ledgerflow'
      ? 'This database has no ledgerflow tables (there is no ledgerflow schema): run `ledgerflow migrate` first.'
      : `This database has no ledgerflow tables, or not all of them (${object} does not exist: it was never migrated, ` +
          'or a core migration is missing): run `ledgerflow migrate` first.',
    { cause: error },
  );
}

/**
 * The database refused to rewrite recorded history (core 0012, SQLSTATE LF001): an UPDATE of a
 * recorded ledger row, a step result, a finished attempt or the archive, or a DELETE of one by a
 * role that is not the retention role. The message is the database's: table, row and rule.
 */
export class RecordImmutableError extends LedgerflowError {
  override readonly name = 'RecordImmutableError';
  readonly code = 'record_immutable';
}

/**
 * The RecordImmutableError for a database error raised by core 0012's immutability triggers
 * (on `error` or its cause chain), or `undefined` when `error` is something else.
 *
 * @example
 * try { … } catch (error) { throw recordImmutableError(error) ?? error; }
 */
export function recordImmutableError(error: unknown): RecordImmutableError | undefined {
  const refused = findSqlState(error, SQLSTATE.RECORD_IMMUTABLE);
  return refused === undefined ? undefined : new RecordImmutableError(refused.message, { cause: error });
}

/** Throw from a handler to fail the run at once, without further attempts. */
export class NonRetryableError extends Error {
  override readonly name: string = 'NonRetryableError';
}

/**
 * Throw from an `external` step's `perform` when the provider DEFINITELY did not apply the
 * request: it refused it (a 4xx the provider documents as "nothing happened", a validation
 * error returned before anything was done). Any other error out of `perform` — your client's own
 * timeout, a reset connection, a 502 from a proxy — leaves the outcome unknown, because the
 * request may have been sent and may still be applied.
 *
 * The failure commit releases the intent, so the next attempt (if any) performs again under the
 * same key at once, without waiting for reconciliation. By default the run then fails like with
 * a {@link NonRetryableError}; `{ retryable: true }` retries per the step's policy (e.g. 429).
 *
 * @example
 * if (response.status === 422) throw new NotAppliedError(`card rejected: ${await response.text()}`);
 * if (response.status === 429) throw new NotAppliedError('rate limited', { retryable: true });
 */
export class NotAppliedError extends Error {
  override readonly name = 'NotAppliedError';
  readonly retryable: boolean;
  constructor(message: string, options: { readonly retryable?: boolean; readonly cause?: unknown } = {}) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.retryable = options.retryable === true;
  }
}

/** The worker lost its lease (fencing token moved on): its commit was rolled back. */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
}
