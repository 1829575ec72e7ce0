import { createQueryId } from 'kysely';
import { describe, expect, it } from 'vitest';
import { compileCase, compileOnly, renderStatement, STATEMENT_CASES } from './fixtures/sql-statements.js';

/**
 * The SQL the runtime sends, one file per statement under `__snapshots__/sql/`, so that a change
 * to a claim or a commit shows up in review as a diff of SQL. Compiled, never executed, from the
 * same `…Statement` builders the runtime executes, with fixed example parameters.
 *
 * A deliberate change: `npx vitest run tests/runtime/sql-snapshots.test.ts -u`, then read the diff.
 */
describe('SQL snapshots', () => {
  const db = compileOnly();

  it('names each snapshot file once', () => {
    const files = STATEMENT_CASES.map((c) => c.file);
    expect(new Set(files).size).toBe(files.length);
  });

  for (const c of STATEMENT_CASES) {
    it(c.file, async () => {
      const compiled = compileCase(c, db);
      // Deterministic: building and compiling again gives the same text and parameters.
      expect(renderStatement(c, compileCase(c, db))).toBe(renderStatement(c, compiled));
      // A statement built once per shape executes its kept text: the same as compiling its tree.
      const statement = c.build(db);
      if ('isRawBuilder' in statement) {
        const walked = db.getExecutor().compileQuery(statement.toOperationNode(), createQueryId());
        expect(renderStatement(c, walked)).toBe(renderStatement(c, compiled));
      }
      await expect(renderStatement(c, compiled)).toMatchFileSnapshot(`__snapshots__/sql/${c.file}`);
    });
  }
});
