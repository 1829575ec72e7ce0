// The value analysis of the functions the runtime evaluates for a step: what the values they
// turn into text are (LF016: an object, a Date or a Promise becomes `[object …]` or a
// time-zone-dependent text, the same or a different key for reasons that have nothing to do
// with the run), and which conditional steps' outputs a key reads without handling their
// absence (LF017). Shapes come from the zod schemas of the workflow's input and the steps'
// outputs, read from their source like everything else codegen reads (no type-check of the
// program: on zod's types that costs several times what the rest of codegen does).
// Here: each function's findings, and what it turns into text (LF016). The shapes and how they are
// read live beside it (value-shapes.ts, schema-shapes.ts, shape-reader.ts), LF017's reads in
// conditional-step-reads.ts.

import { ts } from 'ts-morph';
import type { ConditionalStepRead, KeyValueFindings, StringConversion, ValueShape } from '../model/key-values.js';
import type { AnalysisProgram } from './analysis-program.js';
import { conditionalRead } from './conditional-step-reads.js';
import { boundScope, functionOf, ShapeReader, type ValueContext } from './shape-reader.js';
import { isReference, shortText, skipWrappers, type FunctionLike } from './syntax.js';
import { unstableText } from './value-shapes.js';

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
    if (
      (ts.isPropertyAccessExpression(node) ||
        ts.isElementAccessExpression(node) ||
        (ts.isIdentifier(node) && isReference(node))) &&
      ts.isExpression(node)
    ) {
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
function conversionsIn(
  program: AnalysisProgram,
  fn: FunctionLike,
  reader: ShapeReader,
  depth: number,
): StringConversion[] {
  const conversions: StringConversion[] = [];
  const check = (expression: ts.Expression, via: string): void => {
    const becomes = unstableText(reader.shapeOf(expression));
    if (becomes !== null)
      conversions.push({ at: program.location(expression), text: shortText(expression), via, becomes });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isTemplateExpression(node) && !ts.isTaggedTemplateExpression(node.parent)) {
      for (const span of node.templateSpans) check(span.expression, 'a template literal');
    } else if (
      ts.isBinaryExpression(node) &&
      (node.operatorToken.kind === ts.SyntaxKind.PlusToken || node.operatorToken.kind === ts.SyntaxKind.PlusEqualsToken)
    ) {
      if (isText(node.left)) check(node.right, '+');
      if (isText(node.right) && !ts.isBinaryExpression(skipWrappers(node.left))) check(node.left, '+');
    } else if (ts.isCallExpression(node)) {
      const callee = skipWrappers(node.expression);
      if (
        ts.isIdentifier(callee) &&
        callee.text === 'String' &&
        program.declarationOf(callee) === undefined &&
        node.arguments[0] !== undefined
      ) {
        check(node.arguments[0], 'String()');
      } else if (
        ts.isPropertyAccessExpression(callee) &&
        callee.name.text === 'toString' &&
        node.arguments.length === 0
      ) {
        check(callee.expression, '.toString()');
      } else if (ts.isPropertyAccessExpression(callee) && callee.name.text === 'join') {
        const receiver = skipWrappers(callee.expression);
        if (ts.isArrayLiteralExpression(receiver)) {
          for (const element of receiver.elements) if (!ts.isSpreadElement(element)) check(element, '.join()');
        } else {
          const shape = reader.shapeOf(receiver);
          const becomes = shape.kind === 'array' ? unstableText(shape.element) : null;
          if (becomes !== null)
            conversions.push({
              at: program.location(receiver),
              text: shortText(receiver),
              via: '.join()',
              becomes: becomes === 'object' ? 'array-of-objects' : becomes,
            });
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
  return conversionsIn(program, helper, inner, depth + 1).map((c) => ({
    ...c,
    at,
    via: `${c.via} in ${callee.text}()`,
  }));
}

/** Whether an operand of `+` is text, so that the other operand is turned into text. */
function isText(expression: ts.Expression): boolean {
  const node = skipWrappers(expression);
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node))
    return true;
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken)
    return isText(node.left) || isText(node.right);
  return false;
}
