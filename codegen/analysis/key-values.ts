// The value analysis of the functions the runtime evaluates for a step: what the values they
// turn into text are (LF016: an object, a Date or a Promise becomes `[object …]` or a
// time-zone-dependent text, the same or a different key for reasons that have nothing to do
// with the run), and which conditional steps' outputs a key reads without handling their
// absence (LF017). Shapes come from the zod schemas of the workflow's input and the steps'
// outputs, read from their source like everything else codegen reads (no type-check of the
// program: on zod's types that costs several times what the rest of codegen does).

import { ts } from 'ts-morph';
import type { ConditionalStepRead, KeyValueFindings, StringConversion, UnstableText, ValueShape } from '../model/key-values.js';
import type { ContextDescription } from '../model/purity.js';
import type { AnalysisProgram } from './analysis-program.js';
import { importBindingOf, resolveImportedDeclaration } from './module-exports.js';
import { parameterRoot, rootOf, type BoundScope, type Root } from './purity-roots.js';
import { isReference, isWithin, outermostWrapper, shortText, skipWrappers, type FunctionLike } from './syntax.js';

const UNKNOWN: ValueShape = { kind: 'unknown' };
const PRIMITIVE: ValueShape = { kind: 'primitive' };

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

// ---- schemas -----------------------------------------------------------------------------------

const PRIMITIVE_SCHEMAS = new Set([
  'string', 'number', 'bigint', 'boolean', 'int', 'int32', 'uint32', 'int64', 'uint64', 'float32', 'float64', 'literal', 'enum',
  'nativeEnum', 'email', 'uuid', 'uuidv4', 'uuidv6', 'uuidv7', 'guid', 'url', 'httpUrl', 'cuid', 'cuid2', 'ulid', 'nanoid', 'ksuid',
  'xid', 'ipv4', 'ipv6', 'cidrv4', 'cidrv6', 'e164', 'jwt', 'base64', 'base64url', 'hex', 'hash', 'hostname', 'emoji', 'templateLiteral',
  'stringbool', 'null', 'undefined', 'void', 'nan', 'datetime', 'time', 'duration', 'iso',
]);
const OBJECT_SCHEMAS = new Set(['object', 'strictObject', 'looseObject']);
const KEYED_SCHEMAS = new Set(['record', 'partialRecord', 'map', 'set', 'instanceof']);
const WRAPPING_SCHEMAS = new Set(['optional', 'nullable', 'nullish', 'readonly', 'nonoptional', 'exactOptional']);
/** Schema methods that keep the shape (checks, defaults, descriptions). */
const SHAPE_CHANGING_METHODS = new Set(['transform', 'pipe', 'overwrite', 'preprocess']);

/** The shape of the values a zod schema expression accepts; unknown for what codegen cannot read. */
export function schemaShape(program: AnalysisProgram, expression: ts.Expression | null, seen: Set<ts.Node> = new Set()): ValueShape {
  if (expression === null) return UNKNOWN;
  const node = skipWrappers(expression);
  if (seen.has(node) || seen.size > 64) return UNKNOWN;
  seen.add(node);
  if (ts.isIdentifier(node)) {
    const initializer = constInitializer(program, node);
    return initializer === null ? UNKNOWN : schemaShape(program, initializer, seen);
  }
  if (!ts.isCallExpression(node)) return UNKNOWN;
  const callee = skipWrappers(node.expression);
  if (!ts.isPropertyAccessExpression(callee)) return UNKNOWN;
  const method = callee.name.text;
  const receiver = skipWrappers(callee.expression);
  const namespace = zodNamespaceOf(program, receiver);
  if (namespace === 'z') return baseSchemaShape(program, method, node.arguments, seen);
  if (namespace === 'coerce') return method === 'date' ? { kind: 'date' } : PRIMITIVE;
  if (namespace === 'iso') return PRIMITIVE;
  // A method of a schema: `.optional()`, `.min(1)`, `.array()`, `.or(other)` ...
  const inner = schemaShape(program, receiver, seen);
  if (method === 'array') return { kind: 'array', element: inner };
  if (method === 'or') return union([inner, schemaShape(program, node.arguments[0] ?? null, seen)]);
  if (SHAPE_CHANGING_METHODS.has(method)) return UNKNOWN;
  return inner;
}

function baseSchemaShape(program: AnalysisProgram, method: string, args: ts.NodeArray<ts.Expression>, seen: Set<ts.Node>): ValueShape {
  if (PRIMITIVE_SCHEMAS.has(method)) return PRIMITIVE;
  if (method === 'date') return { kind: 'date' };
  if (method === 'promise') return { kind: 'promise' };
  if (KEYED_SCHEMAS.has(method)) return { kind: 'object', fields: null };
  if (WRAPPING_SCHEMAS.has(method)) return schemaShape(program, args[0] ?? null, seen);
  if (method === 'array') return { kind: 'array', element: schemaShape(program, args[0] ?? null, seen) };
  const list = (argument: ts.Expression | undefined): ValueShape[] => {
    const value = argument === undefined ? undefined : skipWrappers(argument);
    return value !== undefined && ts.isArrayLiteralExpression(value) ? value.elements.map((e) => schemaShape(program, e, seen)) : [UNKNOWN];
  };
  if (method === 'tuple') return { kind: 'array', element: union(list(args[0])) };
  if (method === 'union' || method === 'xor') return union(list(args[0]));
  if (method === 'discriminatedUnion') return union(list(args[1]));
  if (OBJECT_SCHEMAS.has(method)) {
    const shape = args[0] === undefined ? undefined : skipWrappers(args[0]);
    if (shape === undefined || !ts.isObjectLiteralExpression(shape)) return { kind: 'object', fields: null };
    const fields: Record<string, ValueShape> = {};
    for (const property of shape.properties) {
      if (ts.isPropertyAssignment(property) && (ts.isIdentifier(property.name) || ts.isStringLiteral(property.name))) {
        fields[property.name.text] = schemaShape(program, property.initializer, seen);
      } else if (ts.isShorthandPropertyAssignment(property)) {
        fields[property.name.text] = schemaShape(program, property.name, seen);
      } else {
        return { kind: 'object', fields: null };
      }
    }
    return { kind: 'object', fields };
  }
  return UNKNOWN;
}

/** `z` (zod itself), `z.coerce` or `z.iso`, when `node` names one of them; null otherwise. */
function zodNamespaceOf(program: AnalysisProgram, node: ts.Expression): 'z' | 'coerce' | 'iso' | null {
  if (ts.isIdentifier(node)) {
    const declaration = program.declarationOf(node);
    const binding = declaration === undefined ? null : importBindingOf(declaration);
    return binding !== null && /^zod(\/|$)/.test(binding.specifier) ? 'z' : null;
  }
  if (ts.isPropertyAccessExpression(node) && zodNamespaceOf(program, skipWrappers(node.expression)) === 'z') {
    if (node.name.text === 'coerce') return 'coerce';
    if (node.name.text === 'iso') return 'iso';
  }
  return null;
}

/** The initializer of the const an identifier names (in this file or a relative import), or null. */
function constInitializer(program: AnalysisProgram, identifier: ts.Identifier): ts.Expression | null {
  let declaration = program.declarationOf(identifier);
  if (declaration === undefined) return null;
  const binding = importBindingOf(declaration);
  if (binding !== null) {
    if (!binding.specifier.startsWith('.')) return null;
    declaration = resolveImportedDeclaration(program, identifier.getSourceFile().fileName, binding.specifier, binding.importedName) ?? undefined;
  }
  if (declaration === undefined || !ts.isVariableDeclaration(declaration) || declaration.initializer === undefined) return null;
  return (ts.getCombinedNodeFlags(declaration) & ts.NodeFlags.Const) !== 0 ? declaration.initializer : null;
}

function union(members: readonly ValueShape[]): ValueShape {
  return members.length === 1 ? members[0]! : { kind: 'union', members };
}

/** The shape at a dotted path (`customer.id`, `lines[0].sku`) below a value of `shape`. */
export function shapeAt(shape: ValueShape, path: string): ValueShape {
  let current = shape;
  for (const segment of path.match(/\[[^\]]*\]|[^.[\]]+/g) ?? []) {
    current = member(current, segment);
    if (current.kind === 'unknown') return current;
  }
  return current;
}

function member(shape: ValueShape, segment: string): ValueShape {
  switch (shape.kind) {
    case 'object':
      return shape.fields?.[segment.replace(/^\[["']?|["']?\]$/g, '')] ?? UNKNOWN;
    case 'array':
      if (segment.startsWith('[')) return shape.element;
      return segment === 'length' ? PRIMITIVE : UNKNOWN;
    case 'union':
      return union(shape.members.map((m) => member(m, segment)));
    case 'primitive':
      return segment === 'length' ? PRIMITIVE : UNKNOWN;
    default:
      return UNKNOWN;
  }
}

/** What `String(value)` of a value of this shape gives instead of its content; null when it is its content (or unknown). */
export function unstableText(shape: ValueShape): UnstableText | null {
  switch (shape.kind) {
    case 'object':
      return 'object';
    case 'date':
      return 'date';
    case 'promise':
      return 'promise';
    case 'array': {
      const element = unstableText(shape.element);
      return element === 'object' ? 'array-of-objects' : element;
    }
    case 'union':
      for (const m of shape.members) {
        const text = unstableText(m);
        if (text !== null) return text;
      }
      return null;
    case 'primitive':
    case 'unknown':
      return null;
  }
}

// ---- expressions -------------------------------------------------------------------------------

const STRING_GLOBALS = new Set(['String', 'Number', 'Boolean', 'parseInt', 'parseFloat', 'encodeURIComponent', 'encodeURI', 'BigInt']);
const SAME_LIST_METHODS = new Set(['filter', 'slice', 'sort', 'toSorted', 'reverse', 'toReversed', 'concat', 'flat', 'toSpliced']);
const ELEMENT_METHODS = new Set(['at', 'find', 'findLast', 'pop', 'shift']);
const PRIMITIVE_METHODS = new Set([
  'join', 'toString', 'toUpperCase', 'toLowerCase', 'trim', 'trimStart', 'trimEnd', 'padStart', 'padEnd', 'replace', 'replaceAll',
  'toFixed', 'toPrecision', 'toISOString', 'toJSON', 'getTime', 'valueOf', 'indexOf', 'includes', 'startsWith', 'endsWith', 'charAt',
  'substring', 'normalize', 'repeat', 'localeCompare', 'some', 'every', 'findIndex', 'getUTCFullYear', 'getUTCMonth', 'getUTCDate',
  'getUTCHours', 'getUTCMinutes', 'getUTCSeconds', 'getUTCDay', 'codePointAt', 'charCodeAt',
]);

class ShapeReader {
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
      if (operator === ts.SyntaxKind.AmpersandAmpersandToken || operator === ts.SyntaxKind.CommaToken) return this.shapeOf(node.right);
      if (operator === ts.SyntaxKind.EqualsToken) return this.shapeOf(node.right);
      return PRIMITIVE;
    }
    if (ts.isConditionalExpression(node)) return union([this.shapeOf(node.whenTrue), this.shapeOf(node.whenFalse)]);
    if (ts.isObjectLiteralExpression(node)) {
      const fields: Record<string, ValueShape> = {};
      for (const property of node.properties) {
        if (ts.isPropertyAssignment(property) && ts.isIdentifier(property.name)) fields[property.name.text] = this.shapeOf(property.initializer);
        else if (ts.isShorthandPropertyAssignment(property)) fields[property.name.text] = this.shapeOf(property.name);
        else return { kind: 'object', fields: null };
      }
      return { kind: 'object', fields };
    }
    if (ts.isArrayLiteralExpression(node)) {
      return { kind: 'array', element: node.elements.length === 0 ? UNKNOWN : union(node.elements.map((e) => (ts.isSpreadElement(e) ? UNKNOWN : this.shapeOf(e)))) };
    }
    if (ts.isNewExpression(node)) {
      const callee = skipWrappers(node.expression);
      if (ts.isIdentifier(callee) && this.program.declarationOf(callee) === undefined) {
        // A Date built here and turned into text is the purity analysis's finding (LF002, the
        // process's time zone); this analysis reports the Dates it alone can see: the schemas'.
        if (callee.text === 'Date') return UNKNOWN;
        if (callee.text === 'Map' || callee.text === 'Set' || callee.text === 'Object') return { kind: 'object', fields: null };
        if (callee.text === 'Promise') return { kind: 'promise' };
      }
      return UNKNOWN;
    }
    if (ts.isCallExpression(node)) return this.#callShape(node);
    if (ts.isIdentifier(node) || ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) {
      if (ts.isIdentifier(node) && node.text === 'undefined' && this.program.declarationOf(node) === undefined) return PRIMITIVE;
      const root = rootOf(this.program, node, this.scope);
      if (root !== null) return this.#rootShape(root);
      if (ts.isIdentifier(node)) {
        const declaration = this.program.declarationOf(node);
        const parameter = declaration === undefined ? undefined : this.#parameterShape(declaration);
        if (parameter !== undefined) return parameter;
        if (declaration !== undefined && ts.isVariableDeclaration(declaration) && declaration.initializer !== undefined && isWithin(declaration, this.scope.scope)) {
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
    if (ts.isBindingElement(declaration) && ts.isObjectBindingPattern(declaration.parent) && ts.isParameter(declaration.parent.parent)) {
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
      if (receiver.text === 'JSON' || receiver.text === 'Math' || receiver.text === 'Number' || receiver.text === 'String') return PRIMITIVE;
      if (receiver.text === 'Object' && (method === 'keys' || method === 'values' || method === 'entries')) return { kind: 'array', element: UNKNOWN };
    }
    if (method === 'then' || method === 'catch' || method === 'finally') return { kind: 'promise' };
    if (PRIMITIVE_METHODS.has(method)) return PRIMITIVE;
    const of = this.shapeOf(receiver);
    if (SAME_LIST_METHODS.has(method)) return of.kind === 'array' ? of : of.kind === 'primitive' ? PRIMITIVE : UNKNOWN;
    if (ELEMENT_METHODS.has(method) && of.kind === 'array') return of.element;
    if (method === 'map') {
      // `.map((l) => ({ ... }))` makes a list of objects; what else a callback returns is not followed.
      const callback = call.arguments[0] === undefined ? undefined : skipWrappers(call.arguments[0]);
      const returned = callback !== undefined && (ts.isArrowFunction(callback) || ts.isFunctionExpression(callback)) ? returnedExpression(callback) : null;
      const element = returned !== null && ts.isObjectLiteralExpression(skipWrappers(returned)) ? { kind: 'object' as const, fields: null } : UNKNOWN;
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

function functionOf(declaration: ts.Declaration): FunctionLike | null {
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

function boundScope(fn: FunctionLike, context: ContextDescription): BoundScope {
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

// ---- the analysis ------------------------------------------------------------------------------

/**
 * The value findings of one function the runtime evaluates for a step: every value it turns into
 * text that is not a primitive, and every read of a conditional step's output it does not guard.
 * Conversions are also looked for in the same-file helpers it calls with objects (conversionsIn);
 * conditional reads only in its own body.
 */
export function analyzeKeyValues(program: AnalysisProgram, fn: FunctionLike, context: ValueContext): KeyValueFindings {
  const scope = boundScope(fn, context.context);
  const reader = new ShapeReader(program, scope, context);
  const conversions = conversionsIn(program, fn, reader, 0);
  const conditionalReads: ConditionalStepRead[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node) || (ts.isIdentifier(node) && isReference(node))) && ts.isExpression(node)) {
      const read = conditionalRead(program, node, scope, context, fn);
      if (read !== null) conditionalReads.push(read);
    }
    ts.forEachChild(node, visit);
  };
  if (fn.body !== undefined) visit(fn.body);
  for (const parameter of fn.parameters) if (parameter.initializer !== undefined) visit(parameter.initializer);
  return { conversions, conditionalReads };
}

/** How deep helpers are followed for what they turn into text (a key's helper's helper is enough in practice). */
const MAX_HELPER_DEPTH = 2;

/**
 * The values `fn` turns into text that are not primitives, read with `reader`. A helper of the
 * project it calls with a value that is not a primitive is followed (its parameters hold the
 * arguments' shapes), and what it turns into text is reported at the call.
 */
function conversionsIn(program: AnalysisProgram, fn: FunctionLike, reader: ShapeReader, depth: number): StringConversion[] {
  const conversions: StringConversion[] = [];
  const check = (expression: ts.Expression, via: string): void => {
    const becomes = unstableText(reader.shapeOf(expression));
    if (becomes !== null) conversions.push({ at: program.location(expression), text: shortText(expression), via, becomes });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isTemplateExpression(node) && !ts.isTaggedTemplateExpression(node.parent)) {
      for (const span of node.templateSpans) check(span.expression, 'a template literal');
    } else if (ts.isBinaryExpression(node) && (node.operatorToken.kind === ts.SyntaxKind.PlusToken || node.operatorToken.kind === ts.SyntaxKind.PlusEqualsToken)) {
      if (isText(node.left)) check(node.right, '+');
      if (isText(node.right) && !ts.isBinaryExpression(skipWrappers(node.left))) check(node.left, '+');
    } else if (ts.isCallExpression(node)) {
      const callee = skipWrappers(node.expression);
      if (ts.isIdentifier(callee) && callee.text === 'String' && program.declarationOf(callee) === undefined && node.arguments[0] !== undefined) {
        check(node.arguments[0], 'String()');
      } else if (ts.isPropertyAccessExpression(callee) && callee.name.text === 'toString' && node.arguments.length === 0) {
        check(callee.expression, '.toString()');
      } else if (ts.isPropertyAccessExpression(callee) && callee.name.text === 'join') {
        const receiver = skipWrappers(callee.expression);
        if (ts.isArrayLiteralExpression(receiver)) {
          for (const element of receiver.elements) if (!ts.isSpreadElement(element)) check(element, '.join()');
        } else {
          const shape = reader.shapeOf(receiver);
          const becomes = shape.kind === 'array' ? unstableText(shape.element) : null;
          if (becomes !== null) conversions.push({ at: program.location(receiver), text: shortText(receiver), via: '.join()', becomes: becomes === 'object' ? 'array-of-objects' : becomes });
        }
      } else if (ts.isIdentifier(callee) && depth < MAX_HELPER_DEPTH) {
        conversions.push(...helperConversions(program, node, callee, fn, reader, depth));
      }
    }
    ts.forEachChild(node, visit);
  };
  if (fn.body !== undefined) visit(fn.body);
  for (const parameter of fn.parameters) if (parameter.initializer !== undefined) visit(parameter.initializer);
  return conversions;
}

/** What a helper called with values that are not primitives turns into text, reported at the call. */
function helperConversions(
  program: AnalysisProgram,
  call: ts.CallExpression,
  callee: ts.Identifier,
  caller: FunctionLike,
  reader: ShapeReader,
  depth: number,
): StringConversion[] {
  const declaration = program.declarationOf(callee);
  const helper = declaration === undefined ? null : functionOf(declaration);
  if (helper === null || helper === caller || helper.body === undefined) return [];
  const parameters = new Map<ts.ParameterDeclaration, ValueShape>();
  helper.parameters.forEach((parameter, index) => {
    const argument = call.arguments[index];
    if (argument === undefined || parameter.dotDotDotToken !== undefined || ts.isSpreadElement(argument)) return;
    const shape = reader.shapeOf(argument);
    if (unstableText(shape) !== null || shape.kind === 'object') parameters.set(parameter, shape);
  });
  if (parameters.size === 0) return [];
  const inner = new ShapeReader(program, { scope: helper, bindings: new Map() }, reader.context, parameters);
  const at = program.location(call);
  return conversionsIn(program, helper, inner, depth + 1).map((c) => ({ ...c, at, via: `${c.via} in ${callee.text}()` }));
}

/** Whether an operand of `+` is text, so that the other operand is turned into text. */
function isText(expression: ts.Expression): boolean {
  const node = skipWrappers(expression);
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node)) return true;
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) return isText(node.left) || isText(node.right);
  return false;
}

/** The read of a conditional step's whole output at `node`, when it is not guarded; null otherwise. */
function conditionalRead(
  program: AnalysisProgram,
  node: ts.Expression,
  scope: BoundScope,
  context: ValueContext,
  fn: FunctionLike,
): ConditionalStepRead | null {
  const root = rootOf(program, node, scope);
  if (root === null || root.kind !== 'step' || root.path !== '') return null;
  const step = context.steps.get(root.step);
  if (step === undefined || step.when === null || root.step === context.ownStep) return null;
  if (context.ownWhen !== null && normalize(context.ownWhen) === normalize(step.when)) return null;
  const { outer, parent } = outermostWrapper(node);
  // `const out = steps.x`: the uses of `out` are the reads.
  if (ts.isVariableDeclaration(parent) && parent.initializer === outer) return null;
  // `steps.x` inside `steps.x.id`: the read is of `steps.x`, checked here once.
  if (isGuarded(outer, root.step, fn)) return null;
  return { at: program.location(node), step: root.step, text: shortText(chainTop(outer)) };
}

function normalize(text: string): string {
  return text.replace(/\s+/g, '');
}

/** Whether an `if` in `block` (not in a nested function) tests something that mentions the step. */
function testsStep(block: ts.Block, mentions: (node: ts.Node) => boolean): boolean {
  let found = false;
  const visit = (node: ts.Node): void => {
    if (found || ts.isFunctionLike(node)) return;
    if (ts.isIfStatement(node) && mentions(node.expression)) found = true;
    else ts.forEachChild(node, visit);
  };
  ts.forEachChild(block, visit);
  return found;
}

/** The outermost member access, call or optional chain that `node` starts (`steps.x` → `steps.x?.id`). */
function chainTop(node: ts.Node): ts.Node {
  let current = node;
  for (;;) {
    const parent = current.parent;
    if (
      ((ts.isPropertyAccessExpression(parent) || ts.isElementAccessExpression(parent)) && parent.expression === current) ||
      (ts.isCallExpression(parent) && parent.expression === current) ||
      ts.isNonNullExpression(parent) ||
      ts.isParenthesizedExpression(parent)
    ) {
      current = parent;
    } else {
      return current;
    }
  }
}

/**
 * A read of a conditional step's output is guarded when what it is part of says what to do without
 * it: the left side of `??` or `||`, a test (`steps.x === undefined`, `!steps.x`, `typeof`, the
 * condition of `?:`, `&&` or `if`), or a branch of a test that mentions the step.
 */
function isGuarded(read: ts.Node, step: string, fn: FunctionLike): boolean {
  const mentions = (node: ts.Node): boolean => new RegExp(`\\b${step}\\b`).test(node.getText());
  // `if (!steps.x) return 'none';` before the read: an `if` that tests the step guards the whole body.
  if (fn.body !== undefined && ts.isBlock(fn.body) && testsStep(fn.body, mentions)) return true;
  let child: ts.Node = chainTop(read);
  for (let node = child.parent; node !== undefined && node !== fn; child = node, node = node.parent) {
    if (ts.isBinaryExpression(node)) {
      const operator = node.operatorToken.kind;
      if ((operator === ts.SyntaxKind.QuestionQuestionToken || operator === ts.SyntaxKind.BarBarToken) && node.left === child) return true;
      if (operator === ts.SyntaxKind.AmpersandAmpersandToken) return node.left === child || mentions(node.left);
      if (
        operator === ts.SyntaxKind.EqualsEqualsEqualsToken ||
        operator === ts.SyntaxKind.ExclamationEqualsEqualsToken ||
        operator === ts.SyntaxKind.EqualsEqualsToken ||
        operator === ts.SyntaxKind.ExclamationEqualsToken
      ) {
        return true;
      }
    } else if (ts.isPrefixUnaryExpression(node) && node.operator === ts.SyntaxKind.ExclamationToken) {
      return true;
    } else if (ts.isTypeOfExpression(node)) {
      return true;
    } else if (ts.isConditionalExpression(node)) {
      return node.condition === child || mentions(node.condition);
    } else if (ts.isIfStatement(node)) {
      return node.expression === child || mentions(node.expression);
    }
  }
  return false;
}
