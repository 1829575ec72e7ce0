import { sql, type RawBuilder } from 'kysely';

/**
 * The comment a statement's text starts with when the `pg` store is to run it as a named
 * (server-side prepared) statement: parsed and planned by PostgreSQL once per connection, then
 * only bound and executed. PGlite runs it like any other statement; on both stores the comment
 * changes nothing about what the statement does.
 */
export const PREPARED_MARK = '/* ledgerflow:prepared */';

/**
 * Marks a hot worker statement for preparation (see {@link PREPARED_MARK}). Only statements
 * whose text is the same for every execution of a given shape belong here: values are always
 * parameters, lists go in as array parameters (`unnest($1::uuid[])`), never as one placeholder
 * per element — every distinct text becomes one more prepared statement on every connection.
 */
export function prepared<T>(statement: RawBuilder<T>): RawBuilder<T> {
  return sql<T>`${sql.raw(PREPARED_MARK)} ${statement}`;
}
