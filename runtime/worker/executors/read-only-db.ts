/*
 * `ctx.db` of a plain `step`: reads only, each statement in its own `READ ONLY` transaction, and a
 * write refused with `ReadOnlyStepError` (a step runs at least once, so a write could happen
 * twice). No state between statements.
 */
import { sql, type CompiledQuery, type Kysely, type QueryResult } from 'kysely';
import { NonRetryableError } from '../../errors.js';
import { SQLSTATE, sqlStateOf } from '../../store/sqlstate.js';
import type { LedgerflowDatabase } from '../../store/tables.js';
import { statementHandle } from './statement-dialect.js';

/** A `step` handler tried to write through `ctx.db`; the run fails at once (retrying cannot help). */
export class ReadOnlyStepError extends NonRetryableError {
  override readonly name = 'ReadOnlyStepError';
}

/**
 * `ctx.db` of a `step` handler: each statement takes a connection from the store for just that
 * statement and runs it in its own `READ ONLY` transaction — three round trips on PostgreSQL,
 * none held between statements (on PGlite, whose one connection the worker's own commits share,
 * that matters more than a consistent snapshot across the handler's reads).
 */
export function readOnlyDatabase(db: Kysely<LedgerflowDatabase>, stepName: string): Kysely<unknown> {
  const execute = async <R>(compiled: CompiledQuery): Promise<QueryResult<R>> =>
    db.connection().execute(async (conn) => {
      await sql`BEGIN READ ONLY`.execute(conn);
      try {
        const result = await conn.executeQuery<R>(compiled as CompiledQuery<R>);
        await sql`COMMIT`.execute(conn);
        return result;
      } catch (error) {
        await sql`ROLLBACK`.execute(conn).catch(() => {});
        if (sqlStateOf(error) === SQLSTATE.READ_ONLY_SQL_TRANSACTION) {
          throw new ReadOnlyStepError(
            `step "${stepName}" tried to write through ctx.db, which is read-only: a step runs at least once, so a ` +
              'write there could happen twice. Write in a transactional step, through ctx.tx.',
            { cause: error },
          );
        }
        throw error;
      }
    });
  return statementHandle(execute, {
    name: `ctx.db of step "${stepName}"`,
    transactions:
      'ctx.db of a step cannot open a transaction: it is read-only. Write in a transactional step, through ctx.tx.',
  });
}
