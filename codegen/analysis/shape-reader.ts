// The shape of an expression in a function the runtime evaluates for a step: literals, the
// context's parts (the input's, earlier steps' and a `forEach` item's shapes as their schemas
// declare them), what a followed helper was called with, and what common calls return.

import { ts } from 'ts-morph';
import type { ValueShape } from '../model/key-values.js';
import type { ContextDescription } from '../model/purity.js';
import type { AnalysisProgram } from './analysis-program.js';
import { parameterRoot, rootOf, type BoundScope, type Root } from './purity-roots.js';
import { isWithin, skipWrappers, type FunctionLike } from './syntax.js';
import { PRIMITIVE, shapeAt, union, UNKNOWN } from './value-shapes.js';

/** A step as a later function sees it: its output's shape, and its condition when it has one. */
export interface VisibleStepShape {
  readonly shape: ValueShape;
  /** Source text of its `when`, null when it always runs. */
  readonly when: string | null;
}

/** What the value analysis of one function knows about its context. */
export interface ValueContext {
  readonly context: ContextDescription;
  readonly input: ValueShape;
  readonly steps: ReadonlyMap<string, VisibleStepShape>;
  /** A `forEach` step's item (its key and input); unknown elsewhere. */
  readonly item: ValueShape;
  /** Source text of the function's own step's `when`: a read of a step under the same condition is not "may not have run". */
  readonly ownWhen: string | null;
  /** A compensation's own step, whose output exists whenever the compensation runs. */
  readonly ownStep: string | null;
}

const STRING_GLOBALS = new Set([
  'String',
  'Number',
  'Boolean',
  'parseInt',
  'parseFloat',
  'encodeURIComponent',
  'encodeURI',
  'BigInt',
]);
const SAME_LIST_METHODS = new Set([
  'filter',
  'slice',
  'sort',
  'toSorted',
  'reverse',
  'toReversed',
  'concat',
  'flat',
  'toSpliced',
]);
const ELEMENT_METHODS = new Set(['at', 'find', 'findLast', 'pop', 'shift']);
const PRIMITIVE_METHODS = new Set([
  'join',
  'toString',
  'toUpperCase',
  'toLowerCase',
  'trim',
  'trimStart',
  'trimEnd',
  'padStart',
  'padEnd',
  'replace',
  'replaceAll',
  'toFixed',
  'toPrecision',
  'toISOString',
  'toJSON',
  'getTime',
  'assignedValue',
  'indexOf',
  'includes',
  'startsWith',
  'endsWith',
  'charAt',
  'substring',
  'normalize',
  'repeat',
  'localeCompare',
  'some',
  'every',
  'findIndex',
  'getUTCFullYear',
  'getUTCMonth',
  'getUTCDate',
  'getUTCHours',
  'getUTCMinutes',
  'getUTCSeconds',
  'getUTCDay',
  'codePointAt',
  'charCodeAt',
]);

/** Reads the shape of expressions in one function (or a helper it calls), given its context. */
export class ShapeReader {
  readonly #seen = new Set<ts.Node>();

  constructor(
    readonly program: AnalysisProgram,
    readonly scope: BoundScope,
    readonly context: ValueContext,
    /** A followed helper's parameters, with the shapes of the arguments it was called with. */
    readonly parameters: ReadonlyMap<ts.ParameterDeclaration, ValueShape> = new Map(),
  ) {}

  shapeOf(expression: ts.Expression): ValueShape {
    const node = skipWrappers(expression);
    if (this.#seen.has(node)) return UNKNOWN;
    this.#seen.add(node);
    try {
      return this.#shapeOf(node);
    } finally {
      this.#seen.delete(node);
    }
  }

  #shapeOf(node: ts.Expression): ValueShape {
    if (
      ts.isStringLiteral(node) ||
      ts.isNumericLiteral(node) ||
      ts.isBigIntLiteral(node) ||
      ts.isNoSubstitutionTemplateLiteral(node) ||
      ts.isTemplateExpression(node) ||
      ts.isPrefixUnaryExpression(node) ||
      ts.isTypeOfExpression(node) ||
      node.kind === ts.SyntaxKind.TrueKeyword ||
      node.kind === ts.SyntaxKind.FalseKeyword ||
      node.kind === ts.SyntaxKind.NullKeyword
    ) {
      return PRIMITIVE;
    }
    if (ts.isBinaryExpression(node)) {
      const operator = node.operatorToken.kind;
      if (operator === ts.SyntaxKind.QuestionQuestionToken || operator === ts.SyntaxKind.BarBarToken) {
        return union([this.shapeOf(node.left), this.shapeOf(node.right)]);
      }
      if (operator === ts.SyntaxKind.AmpersandAmpersandToken || operator === ts.SyntaxKind.CommaToken)
        return this.shapeOf(node.right);
      if (operator === ts.SyntaxKind.EqualsToken) return this.shapeOf(node.right);
      return PRIMITIVE;
    }
    if (ts.isConditionalExpression(node)) return union([this.shapeOf(node.whenTrue), this.shapeOf(node.whenFalse)]);
    if (ts.isObjectLiteralExpression(node)) {
      const fields: Record<string, ValueShape> = {};
      for (const property of node.properties) {
        if (ts.isPropertyAssignment(property) && ts.isIdentifier(property.name))
          fields[property.name.text] = this.shapeOf(property.initializer);
        else if (ts.isShorthandPropertyAssignment(property)) fields[property.name.text] = this.shapeOf(property.name);
        else return { kind: 'object', fields: null };
      }
      return { kind: 'object', fields };
    }
    if (ts.isArrayLiteralExpression(node)) {
      return {
        kind: 'array',
        element:
          node.elements.length === 0
            ? UNKNOWN
            : union(node.elements.map((e) => (ts.isSpreadElement(e) ? UNKNOWN : this.shapeOf(e)))),
      };
    }
    if (ts.isNewExpression(node)) {
      const callee = skipWrappers(node.expression);
      if (ts.isIdentifier(callee) && this.program.declarationOf(callee) === undefined) {
        // A Date built here and turned into text is the purity analysis's finding (LF002, the
        // process's time zone); this analysis reports the Dates it alone can see: the schemas'.
        if (callee.text === 'Date') return UNKNOWN;
        if (callee.text === 'Map' || callee.text === 'Set' || callee.text === 'Object')
          return { kind: 'object', fields: null };
        if (callee.text === 'Promise') return { kind: 'promise' };
      }
      return UNKNOWN;
    }
    if (ts.isCallExpression(node)) return this.#callShape(node);
    if (ts.isIdentifier(node) || ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) {
      if (ts.isIdentifier(node) && node.text === 'undefined' && this.program.declarationOf(node) === undefined)
        return PRIMITIVE;
      const root = rootOf(this.program, node, this.scope);
      if (root !== null) return this.#rootShape(root);
      if (ts.isIdentifier(node)) {
        const declaration = this.program.declarationOf(node);
        const parameter = declaration === undefined ? undefined : this.#parameterShape(declaration);
        if (parameter !== undefined) return parameter;
        if (
          declaration !== undefined &&
          ts.isVariableDeclaration(declaration) &&
          declaration.initializer !== undefined &&
          isWithin(declaration, this.scope.scope)
        ) {
          return this.shapeOf(declaration.initializer);
        }
      } else if (ts.isPropertyAccessExpression(node) && node.name.text === 'length') {
        return PRIMITIVE;
      }
    }
    return UNKNOWN;
  }

  /** The shape a followed helper's parameter (or a field destructured from it) holds; undefined when not one. */
  #parameterShape(declaration: ts.Declaration): ValueShape | undefined {
    if (ts.isParameter(declaration)) return this.parameters.get(declaration);
    if (
      ts.isBindingElement(declaration) &&
      ts.isObjectBindingPattern(declaration.parent) &&
      ts.isParameter(declaration.parent.parent)
    ) {
      const whole = this.parameters.get(declaration.parent.parent);
      const name = declaration.propertyName ?? declaration.name;
      if (whole === undefined || declaration.dotDotDotToken !== undefined || !ts.isIdentifier(name)) return undefined;
      return shapeAt(whole, name.text);
    }
    return undefined;
  }

  #callShape(call: ts.CallExpression): ValueShape {
    const callee = skipWrappers(call.expression);
    if (ts.isIdentifier(callee)) {
      const declaration = this.program.declarationOf(callee);
      if (declaration === undefined) return STRING_GLOBALS.has(callee.text) ? PRIMITIVE : UNKNOWN;
      const fn = functionOf(declaration);
      if (fn === null) return UNKNOWN;
      if (isAsync(fn) || (fn.type !== undefined && /^Promise\s*</.test(fn.type.getText()))) return { kind: 'promise' };
      return UNKNOWN;
    }
    if (!ts.isPropertyAccessExpression(callee)) return UNKNOWN;
    const method = callee.name.text;
    const receiver = skipWrappers(callee.expression);
    if (ts.isIdentifier(receiver) && this.program.declarationOf(receiver) === undefined) {
      if (receiver.text === 'Promise') return { kind: 'promise' };
      if (
        receiver.text === 'JSON' ||
        receiver.text === 'Math' ||
        receiver.text === 'Number' ||
        receiver.text === 'String'
      )
        return PRIMITIVE;
      if (receiver.text === 'Object' && (method === 'keys' || method === 'values' || method === 'entries'))
        return { kind: 'array', element: UNKNOWN };
    }
    if (method === 'then' || method === 'catch' || method === 'finally') return { kind: 'promise' };
    if (PRIMITIVE_METHODS.has(method)) return PRIMITIVE;
    const of = this.shapeOf(receiver);
    if (SAME_LIST_METHODS.has(method)) return of.kind === 'array' ? of : of.kind === 'primitive' ? PRIMITIVE : UNKNOWN;
    if (ELEMENT_METHODS.has(method) && of.kind === 'array') return of.element;
    if (method === 'map') {
      // `.map((l) => ({ ... }))` makes a list of objects; what else a callback returns is not followed.
      const callback = call.arguments[0] === undefined ? undefined : skipWrappers(call.arguments[0]);
      const returned =
        callback !== undefined && (ts.isArrowFunction(callback) || ts.isFunctionExpression(callback))
          ? returnedExpression(callback)
          : null;
      const element =
        returned !== null && ts.isObjectLiteralExpression(skipWrappers(returned))
          ? { kind: 'object' as const, fields: null }
          : UNKNOWN;
      return { kind: 'array', element };
    }
    if (method === 'flatMap') return { kind: 'array', element: UNKNOWN };
    return UNKNOWN;
  }

  #rootShape(root: Root): ValueShape {
    switch (root.kind) {
      case 'ctx':
      case 'steps':
        return { kind: 'object', fields: null };
      case 'rest':
        return { kind: 'array', element: { kind: 'object', fields: null } };
      case 'steps-dynamic':
        return UNKNOWN;
      case 'data':
        if (root.property === 'input') return shapeAt(this.context.input, root.path);
        if (root.property === 'item') return shapeAt(this.context.item, root.path);
        return root.path === '' ? PRIMITIVE : UNKNOWN; // index, scheduledAt
      case 'step': {
        const step = this.context.steps.get(root.step);
        return step === undefined ? UNKNOWN : shapeAt(step.shape, root.path);
      }
    }
  }
}

/** The function a declaration declares: a function declaration, or a variable initialised with an arrow or function expression. */
export function functionOf(declaration: ts.Declaration): FunctionLike | null {
  if (ts.isFunctionDeclaration(declaration)) return declaration;
  if (ts.isVariableDeclaration(declaration) && declaration.initializer !== undefined) {
    const value = skipWrappers(declaration.initializer);
    if (ts.isArrowFunction(value) || ts.isFunctionExpression(value)) return value;
  }
  return null;
}

function isAsync(fn: FunctionLike): boolean {
  return ts.canHaveModifiers(fn) && (ts.getModifiers(fn)?.some((m) => m.kind === ts.SyntaxKind.AsyncKeyword) ?? false);
}

/** The scope of a step function: its first parameter is the context. */
export function boundScope(fn: FunctionLike, context: ContextDescription): BoundScope {
  const bindings = new Map<ts.ParameterDeclaration, Root>();
  const parameter = fn.parameters[0];
  if (parameter !== undefined) bindings.set(parameter, parameterRoot(parameter, context));
  return { scope: fn, bindings };
}

/** The shape of one item of the list a `forEach` step's `items` returns (unknown when codegen cannot tell). */
export function itemShape(program: AnalysisProgram, items: FunctionLike, context: ValueContext): ValueShape {
  const returned = returnedExpression(items);
  if (returned === null) return UNKNOWN;
  const list = new ShapeReader(program, boundScope(items, context.context), context).shapeOf(returned);
  return list.kind === 'array' ? list.element : UNKNOWN;
}

function returnedExpression(fn: FunctionLike): ts.Expression | null {
  const body = fn.body;
  if (body === undefined) return null;
  if (!ts.isBlock(body)) return body;
  const returns = body.statements.filter(ts.isReturnStatement);
  return returns.length === 1 ? (returns[0]!.expression ?? null) : null;
}
