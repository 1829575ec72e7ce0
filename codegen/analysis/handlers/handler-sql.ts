// What the handler analysis recognises as a database write, by name and by SQL text: Kysely's
// write builders and transactions, raw SQL whose first word writes, and the database entry
// points it uses to tell a database handle from another client.

import { ts } from 'ts-morph';
import type { AnalysisProgram } from '../analysis-program.js';
import { importBindingOf } from '../module-exports.js';
import { propertyName, skipWrappers } from '../syntax.js';

/** Kysely methods that start a write statement. */
export const WRITE_BUILDERS: ReadonlySet<string> = new Set([
  'insertInto',
  'updateTable',
  'deleteFrom',
  'mergeInto',
  'replaceInto',
]);

/** Methods that open a transaction of their own (Kysely's `transaction()`/`startTransaction()`, knex and drizzle's `transaction(cb)`). */
export const TRANSACTION_METHODS: ReadonlySet<string> = new Set(['transaction', 'startTransaction']);

/** Methods that run SQL text given as their first argument (pg's `query`, mysql2's `execute`, PGlite's `exec`). */
export const TEXT_QUERY_METHODS: ReadonlySet<string> = new Set(['query', 'execute', 'exec']);

/**
 * Methods that mark their receiver as a database handle, not a client of another system: Kysely's
 * entry points and the text-query methods. Calls through a database handle are never taken for
 * calls of an external system (LF011's hint).
 */
export const DATABASE_METHODS: ReadonlySet<string> = new Set([
  ...WRITE_BUILDERS,
  ...TRANSACTION_METHODS,
  ...TEXT_QUERY_METHODS,
  'selectFrom',
  'selectNoFrom',
  'with',
  'withRecursive',
  'withSchema',
  'withPlugin',
  'withoutPlugins',
  'connection',
  'executeQuery',
  'getExecutor',
  'dynamic',
  'fn',
  'connect',
]);

const WRITE_WORD = /^(insert|update|delete|merge|truncate|create|alter|drop)\b/i;

/** Whether SQL text starts (after blanks, comments and parentheses) with a word that writes. */
export function isWriteSql(text: string): boolean {
  let rest = text;
  for (;;) {
    const trimmed = rest.replace(/^[\s(]+/, '');
    if (trimmed.startsWith('--')) {
      const newline = trimmed.indexOf('\n');
      rest = newline === -1 ? '' : trimmed.slice(newline + 1);
    } else if (trimmed.startsWith('/*')) {
      const end = trimmed.indexOf('*/');
      rest = end === -1 ? '' : trimmed.slice(end + 2);
    } else {
      return WRITE_WORD.test(trimmed);
    }
  }
}

/**
 * The leading SQL text of an expression, when it is written out: a string or template literal
 * (up to its first substitution), the left end of a `+` concatenation, a `const` holding one,
 * or pg's query config object (`{ text: ... }`, mysql2's `{ sql: ... }`). Null otherwise.
 */
export function sqlTextOf(program: AnalysisProgram, expression: ts.Expression, depth = 0): string | null {
  if (depth > 8) return null;
  const node = skipWrappers(expression);
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) return node.head.text;
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    return sqlTextOf(program, node.left, depth + 1);
  }
  if (ts.isObjectLiteralExpression(node)) {
    for (const property of node.properties) {
      const name = propertyName(property);
      if ((name === 'text' || name === 'sql') && ts.isPropertyAssignment(property)) {
        return sqlTextOf(program, property.initializer, depth + 1);
      }
    }
    return null;
  }
  if (ts.isIdentifier(node)) {
    const declaration = program.declarationOf(node);
    if (
      declaration !== undefined &&
      ts.isVariableDeclaration(declaration) &&
      declaration.initializer !== undefined &&
      (declaration.parent.flags & ts.NodeFlags.Const) !== 0
    ) {
      return sqlTextOf(program, declaration.initializer, depth + 1);
    }
  }
  return null;
}

/** Whether an identifier is Kysely's `sql` tag (imported from 'kysely'), which builds a query but runs nothing. */
export function isKyselySqlTag(program: AnalysisProgram, tag: ts.Expression): boolean {
  const node = skipWrappers(tag);
  if (ts.isIdentifier(node)) {
    const declaration = program.declarationOf(node);
    const binding = declaration === undefined ? null : importBindingOf(declaration);
    return binding !== null && binding.specifier === 'kysely' && binding.importedName === 'sql';
  }
  if (ts.isPropertyAccessExpression(node) && node.name.text === 'sql' && ts.isIdentifier(node.expression)) {
    const declaration = program.declarationOf(node.expression);
    const binding = declaration === undefined ? null : importBindingOf(declaration);
    return binding !== null && binding.specifier === 'kysely' && binding.importedName === '*';
  }
  return false;
}

/**
 * The SQL text of a Kysely raw query value: `` sql`...` `` or `sql.raw('...')` (Kysely's `sql`),
 * directly or through a `const`. Null for anything else.
 */
export function kyselyRawSqlText(program: AnalysisProgram, expression: ts.Expression, depth = 0): string | null {
  if (depth > 8) return null;
  const node = skipWrappers(expression);
  if (ts.isTaggedTemplateExpression(node) && isKyselySqlTag(program, node.tag)) {
    return ts.isNoSubstitutionTemplateLiteral(node.template) ? node.template.text : node.template.head.text;
  }
  if (
    ts.isCallExpression(node) &&
    ts.isPropertyAccessExpression(node.expression) &&
    node.expression.name.text === 'raw' &&
    isKyselySqlTag(program, node.expression.expression) &&
    node.arguments[0] !== undefined
  ) {
    return sqlTextOf(program, node.arguments[0], depth + 1);
  }
  if (ts.isIdentifier(node)) {
    const declaration = program.declarationOf(node);
    if (
      declaration !== undefined &&
      ts.isVariableDeclaration(declaration) &&
      declaration.initializer !== undefined &&
      (declaration.parent.flags & ts.NodeFlags.Const) !== 0
    ) {
      return kyselyRawSqlText(program, declaration.initializer, depth + 1);
    }
  }
  return null;
}
