// A key's value as a sequence of literal text and context paths, so that two spellings of one key
// compare equal: `charge:${input.orderId}`, 'charge:' + input.orderId,
// ['charge', input.orderId].join(':'), `${PREFIX}:${input.orderId}` with const PREFIX = 'charge'
// (here or imported) and ({ input: { orderId } }) => `charge:${orderId}` are all
// [literal "charge:", path input.orderId]. LF014 compares these; where a key is not built only of
// such pieces, its value is null and LF014 falls back to comparing source.

import { ts } from 'ts-morph';
import type { KeySegment } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import { importBindingOf, resolveImportedDeclaration } from './module-exports.js';
import { skipWrappers, variableKeyword, type FunctionLike } from './syntax.js';

/** A value being folded: its segments, and whether it is known to be a string (what makes `+` concatenation). */
interface Folded {
  readonly segments: readonly KeySegment[];
  readonly string: boolean;
}

/** Names bound to context paths by the function's parameter: `ctx` → '', `input` → 'input', `orderId` → 'input.orderId'. */
type Bindings = ReadonlyMap<string, string>;

/** How deep constants are followed (a constant defined by another, ...). */
const MAX_DEPTH = 16;

/**
 * The key function's value as literal text and context paths (`input.orderId`, `steps.load.id`),
 * adjacent literals merged; null when it is built of anything else (a call, a conditional, a
 * local variable, a parameter destructured with defaults or a rest).
 */
export function keyValue(program: AnalysisProgram, fn: FunctionLike): readonly KeySegment[] | null {
  const returned = returnedExpression(fn);
  const bindings = parameterBindings(fn);
  if (returned === null || bindings === null) return null;
  const folded = fold(program, returned, bindings, 0);
  return folded === null ? null : merge(folded.segments);
}

function returnedExpression(fn: FunctionLike): ts.Expression | null {
  const body = fn.body;
  if (body === undefined) return null;
  if (!ts.isBlock(body)) return body;
  const [statement, ...rest] = body.statements;
  return rest.length === 0 &&
    statement !== undefined &&
    ts.isReturnStatement(statement) &&
    statement.expression !== undefined
    ? statement.expression
    : null;
}

function parameterBindings(fn: FunctionLike): Bindings | null {
  const bindings = new Map<string, string>();
  const [parameter, ...rest] = fn.parameters;
  if (parameter === undefined) return bindings;
  if (rest.length > 0 || parameter.dotDotDotToken !== undefined || parameter.initializer !== undefined) return null;
  return bind(parameter.name, '', bindings) ? bindings : null;
}

/** Binds the names of `name` to paths under `path`; false for a default, a rest or an array pattern. */
function bind(name: ts.BindingName, path: string, bindings: Map<string, string>): boolean {
  if (ts.isIdentifier(name)) {
    bindings.set(name.text, path);
    return true;
  }
  if (!ts.isObjectBindingPattern(name)) return false;
  for (const element of name.elements) {
    if (element.dotDotDotToken !== undefined || element.initializer !== undefined) return false;
    const property = element.propertyName ?? element.name;
    const key = ts.isIdentifier(property) || ts.isStringLiteral(property) ? property.text : null;
    if (key === null || !bind(element.name, join(path, key), bindings)) return false;
  }
  return true;
}

function fold(program: AnalysisProgram, node: ts.Expression, bindings: Bindings, depth: number): Folded | null {
  if (depth > MAX_DEPTH) return null;
  const expression = skipWrappers(node);
  if (ts.isStringLiteral(expression) || ts.isNoSubstitutionTemplateLiteral(expression)) return literal(expression.text);
  if (ts.isNumericLiteral(expression))
    return { segments: [{ literal: String(Number(expression.text.replaceAll('_', ''))) }], string: false };
  if (ts.isTemplateExpression(expression)) {
    const segments: KeySegment[] = [{ literal: expression.head.text }];
    for (const span of expression.templateSpans) {
      const value = fold(program, span.expression, bindings, depth + 1);
      if (value === null) return null;
      segments.push(...value.segments, { literal: span.literal.text });
    }
    return { segments, string: true };
  }
  if (ts.isBinaryExpression(expression) && expression.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    const left = fold(program, expression.left, bindings, depth + 1);
    const right = fold(program, expression.right, bindings, depth + 1);
    // Without a string on either side, `+` may be an addition.
    if (left === null || right === null || (!left.string && !right.string)) return null;
    return { segments: [...left.segments, ...right.segments], string: true };
  }
  if (ts.isCallExpression(expression)) return foldCall(program, expression, bindings, depth);
  const path = contextPath(expression, bindings);
  if (path !== null) return { segments: [{ path }], string: false };
  if (ts.isIdentifier(expression)) return foldConstant(program, expression, depth);
  return null;
}

/** `String(x)` and `[a, b].join(sep)`; any other call is not folded. */
function foldCall(program: AnalysisProgram, call: ts.CallExpression, bindings: Bindings, depth: number): Folded | null {
  const callee = skipWrappers(call.expression);
  if (
    ts.isIdentifier(callee) &&
    callee.text === 'String' &&
    call.arguments.length === 1 &&
    program.declarationOf(callee) === undefined
  ) {
    const value = fold(program, call.arguments[0]!, bindings, depth + 1);
    return value === null ? null : { segments: value.segments, string: true };
  }
  if (!ts.isPropertyAccessExpression(callee) || callee.name.text !== 'join' || call.arguments.length > 1) return null;
  const array = skipWrappers(callee.expression);
  if (!ts.isArrayLiteralExpression(array)) return null;
  let separator = ',';
  if (call.arguments.length === 1) {
    const value = fold(program, call.arguments[0]!, bindings, depth + 1);
    if (value === null || !value.segments.every((s) => 'literal' in s)) return null;
    separator = value.segments.map((s) => ('literal' in s ? s.literal : '')).join('');
  }
  const segments: KeySegment[] = [];
  for (const [index, element] of array.elements.entries()) {
    if (ts.isSpreadElement(element) || ts.isOmittedExpression(element)) return null;
    const value = fold(program, element, bindings, depth + 1);
    if (value === null) return null;
    if (index > 0) segments.push({ literal: separator });
    segments.push(...value.segments);
  }
  return { segments, string: true };
}

/** `input.orderId`, `ctx.input['orderId']`, `orderId` bound by the parameter: the context path; null otherwise. */
function contextPath(expression: ts.Expression, bindings: Bindings): string | null {
  if (ts.isIdentifier(expression)) return bindings.get(expression.text) ?? null;
  if (ts.isPropertyAccessExpression(expression)) {
    const base = contextPath(skipWrappers(expression.expression), bindings);
    return base === null ? null : join(base, expression.name.text);
  }
  if (ts.isElementAccessExpression(expression)) {
    const argument = expression.argumentExpression;
    if (!ts.isStringLiteral(argument) && !ts.isNoSubstitutionTemplateLiteral(argument)) return null;
    const base = contextPath(skipWrappers(expression.expression), bindings);
    return base === null ? null : join(base, argument.text);
  }
  return null;
}

/** A `const` of this module or a relative import whose initializer folds without the context. */
function foldConstant(program: AnalysisProgram, identifier: ts.Identifier, depth: number): Folded | null {
  let declaration: ts.Declaration | null = program.declarationOf(identifier) ?? null;
  const binding = declaration === null ? null : importBindingOf(declaration);
  if (binding !== null) {
    declaration = resolveImportedDeclaration(
      program,
      declaration!.getSourceFile().fileName,
      binding.specifier,
      binding.importedName,
    );
  }
  if (declaration === null || !ts.isVariableDeclaration(declaration) || variableKeyword(declaration) !== 'const')
    return null;
  if (!ts.isIdentifier(declaration.name) || declaration.initializer === undefined) return null;
  return fold(program, declaration.initializer, new Map(), depth + 1);
}

function literal(text: string): Folded {
  return { segments: [{ literal: text }], string: true };
}

function join(path: string, member: string): string {
  return path === '' ? member : `${path}.${member}`;
}

/** Adjacent literals as one, empty ones dropped: `['charge', ':', input.orderId]` is `['charge:', input.orderId]`. */
function merge(segments: readonly KeySegment[]): KeySegment[] {
  const merged: KeySegment[] = [];
  for (const segment of segments) {
    const last = merged.at(-1);
    if ('literal' in segment) {
      if (segment.literal === '') continue;
      if (last !== undefined && 'literal' in last)
        merged[merged.length - 1] = { literal: last.literal + segment.literal };
      else merged.push(segment);
    } else {
      merged.push(segment);
    }
  }
  return merged;
}
