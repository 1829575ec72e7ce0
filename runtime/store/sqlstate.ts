/**
 * SQLSTATE codes ledgerflow reacts to. Both drivers put the code on the thrown error's `code`
 * property (`pg`'s DatabaseError and PGlite's), so matching on these is store-independent.
 */
export const SQLSTATE = {
  UNIQUE_VIOLATION: '23505',
  FOREIGN_KEY_VIOLATION: '23503',
  CHECK_VIOLATION: '23514',
  SERIALIZATION_FAILURE: '40001',
  DEADLOCK_DETECTED: '40P01',
  INVALID_TEXT_REPRESENTATION: '22P02',
  UNDEFINED_TABLE: '42P01',
  DUPLICATE_DATABASE: '42P04',
  INVALID_SCHEMA_NAME: '3F000',
  UNDEFINED_FUNCTION: '42883',
  ADMIN_SHUTDOWN: '57P01',
  CANNOT_CONNECT_NOW: '57P03',
  TOO_MANY_CONNECTIONS: '53300',
  INVALID_PASSWORD: '28P01',
  INVALID_AUTHORIZATION: '28000',
  UNKNOWN_DATABASE: '3D000',
  READ_ONLY_SQL_TRANSACTION: '25006',
  INSUFFICIENT_PRIVILEGE: '42501',
  /** ledgerflow's own (core 0012): an UPDATE/DELETE/TRUNCATE of recorded history was refused. */
  RECORD_IMMUTABLE: 'LF001',
} as const;

export type SqlState = (typeof SQLSTATE)[keyof typeof SQLSTATE];

/** The SQLSTATE of a database error, or `undefined` for anything else (network errors, bugs). */
export function sqlStateOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  const code = (error as { code: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** The constraint a violation names, when the driver reports one. */
export function constraintOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('constraint' in error)) return undefined;
  const constraint = (error as { constraint: unknown }).constraint;
  return typeof constraint === 'string' ? constraint : undefined;
}

const MISSING_OBJECT_STATES = new Set<string>([
  SQLSTATE.UNDEFINED_TABLE,
  SQLSTATE.INVALID_SCHEMA_NAME,
  SQLSTATE.UNDEFINED_FUNCTION,
]);

/**
 * The ledgerflow object a query needed and the database does not have — `ledgerflow.workflow_run`,
 * `ledgerflow.claim_runs`, or the schema `ledgerflow` itself — when `error` (or its cause) says
 * so; `undefined` for anything else, including a missing object outside the ledgerflow schema
 * (a handler's own table is the handler's problem). It means the database was never migrated,
 * or a core migration is missing: both are fixed by `ledgerflow migrate`.
 */
export function missingLedgerflowObject(error: unknown): string | undefined {
  for (let current = error, depth = 0; current !== undefined && depth < 5; depth++) {
    const state = sqlStateOf(current);
    if (state !== undefined && MISSING_OBJECT_STATES.has(state)) {
      const message = current instanceof Error ? current.message : '';
      // PostgreSQL's wording: relation "ledgerflow.x" / function ledgerflow.x(…) / schema "ledgerflow" does not exist.
      const named = /(?:relation|function|schema) "?(ledgerflow(?:\.[a-z_0-9]+)?)\b/.exec(message);
      if (named !== null) return named[1];
    }
    current =
      typeof current === 'object' && current !== null && 'cause' in current
        ? (current as { cause: unknown }).cause
        : undefined;
  }
  return undefined;
}

/**
 * The database error (on `error` or its cause chain) whose SQLSTATE is `state`, or `undefined`.
 */
export function findSqlState(error: unknown, state: SqlState): Error | undefined {
  for (let current = error, depth = 0; current !== undefined && depth < 5; depth++) {
    if (sqlStateOf(current) === state && current instanceof Error) return current;
    current =
      typeof current === 'object' && current !== null && 'cause' in current
        ? (current as { cause: unknown }).cause
        : undefined;
  }
  return undefined;
}
