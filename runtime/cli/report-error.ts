import { LedgerflowError, notMigratedError, recordImmutableError } from '../errors.js';
import { findSqlState, SQLSTATE, sqlStateOf } from '../store/sqlstate.js';
import type { CliIo } from './cli-io.js';
import { UsageError } from './command.js';
import { WorkflowModuleError } from './load-workflows.js';
import { UserModuleError } from './user-module-error.js';

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ETIMEDOUT',
  'ECONNRESET',
  'EAI_AGAIN',
  'ENOWRITABLEHOST',
  'EREADONLYHOST',
]);
const CONNECTION_STATES = new Set<string>([
  SQLSTATE.INVALID_PASSWORD,
  SQLSTATE.INVALID_AUTHORIZATION,
  SQLSTATE.UNKNOWN_DATABASE,
  SQLSTATE.CANNOT_CONNECT_NOW,
  SQLSTATE.TOO_MANY_CONNECTIONS,
]);

/**
 * Prints an error the way its cause deserves and returns the exit code: user mistakes and
 * refusals get one clear message and no stack (2 for the command line and for a module it names
 * that cannot load as it stands, 1 otherwise); an unreachable database gets what to check; only
 * a real bug gets a stack trace.
 */
export function reportError(error: unknown, command: string, io: CliIo): number {
  const prefix = command ? `ledgerflow ${command}` : 'ledgerflow';
  if (error instanceof UsageError) {
    io.err(`${prefix}: ${error.message}\nRun \`ledgerflow ${command ? `${command} ` : ''}--help\` for usage.\n`);
    return 2;
  }
  if (error instanceof UserModuleError) {
    io.err(`${prefix}: ${error.message}\n`);
    return 2;
  }
  if (error instanceof LedgerflowError) {
    io.err(`${prefix}: ${error.message}\n`);
    return 1;
  }
  if (error instanceof WorkflowModuleError) {
    const cause = error.cause instanceof Error ? `\n${error.cause.stack ?? error.cause.message}` : '';
    io.err(`${prefix}: ${error.message}${cause}\n`);
    return 1;
  }
  if (cannotReachDatabase(error)) {
    io.err(
      `${prefix}: cannot use the database: ${describe(error)}. ` +
        'Check --database-url / DATABASE_URL and that the PostgreSQL server is running and reachable.\n',
    );
    return 1;
  }
  const notMigrated = notMigratedError(error);
  if (notMigrated !== undefined) {
    io.err(`${prefix}: ${notMigrated.message}\n`);
    return 1;
  }
  const immutable = recordImmutableError(error);
  if (immutable !== undefined) {
    io.err(`${prefix}: ${immutable.message}\n`);
    return 1;
  }
  const denied = findSqlState(error, SQLSTATE.INSUFFICIENT_PRIVILEGE);
  if (denied !== undefined) {
    io.err(
      `${prefix}: the database refused: ${denied.message}. The role this command connects as lacks a privilege it needs; ` +
        'see docs/operations/roles.md (`ledgerflow grants` prints the GRANTs).\n',
    );
    return 1;
  }
  const stack = error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error);
  io.err(`${prefix}: internal error. This is a bug in ledgerflow; please report it with this trace:\n${stack}\n`);
  return 1;
}

/**
 * The database could not be reached or refused us (down, wrong host, wrong password, no such
 * database): something the user fixes in the connection settings. Not `isConnectionError`
 * (store/connection-errors.ts), which asks whether a commit's outcome became unknown.
 */
function cannotReachDatabase(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  const state = sqlStateOf(error);
  if (state !== undefined && CONNECTION_STATES.has(state)) return true;
  // `pg` reports a refused connection to a name with several addresses as an AggregateError.
  return error instanceof AggregateError && error.errors.some(cannotReachDatabase);
}

function describe(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0 && !error.message) return describe(error.errors[0]);
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && !message.includes(code) ? `${message} (${code})` : message;
}
