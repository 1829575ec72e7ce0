// The shape of the values a zod schema accepts, read from the schema's source (a workflow's input,
// a step's output): what the value analysis (key-values.ts) knows of a step function's context.

import { ts } from 'ts-morph';
import type { ValueShape } from '../model/key-values.js';
import type { AnalysisProgram } from './analysis-program.js';
import { importBindingOf, resolveImportedDeclaration } from './module-exports.js';
import { skipWrappers } from './syntax.js';
import { PRIMITIVE, union, UNKNOWN } from './value-shapes.js';

const PRIMITIVE_SCHEMAS = new Set([
  'string',
  'number',
  'bigint',
  'boolean',
  'int',
  'int32',
  'uint32',
  'int64',
  'uint64',
  'float32',
  'float64',
  'literal',
  'enum',
  'nativeEnum',
  'email',
  'uuid',
  'uuidv4',
  'uuidv6',
  'uuidv7',
  'guid',
  'url',
  'httpUrl',
  'cuid',
  'cuid2',
  'ulid',
  'nanoid',
  'ksuid',
  'xid',
  'ipv4',
  'ipv6',
  'cidrv4',
  'cidrv6',
  'e164',
  'jwt',
  'base64',
  'base64url',
  'hex',
  'hash',
  'hostname',
  'emoji',
  'templateLiteral',
  'stringbool',
  'null',
  'undefined',
  'void',
  'nan',
  'datetime',
  'time',
  'duration',
  'iso',
]);
const OBJECT_SCHEMAS = new Set(['object', 'strictObject', 'looseObject']);
const KEYED_SCHEMAS = new Set(['record', 'partialRecord', 'map', 'set', 'instanceof']);
const WRAPPING_SCHEMAS = new Set(['optional', 'nullable', 'nullish', 'readonly', 'nonoptional', 'exactOptional']);
/** Schema methods that keep the shape (checks, defaults, descriptions). */
const SHAPE_CHANGING_METHODS = new Set(['transform', 'pipe', 'overwrite', 'preprocess']);

/** The shape of the values a zod schema expression accepts; unknown for what codegen cannot read. */
export function schemaShape(
  program: AnalysisProgram,
  expression: ts.Expression | null,
  seen: Set<ts.Node> = new Set(),
): ValueShape {
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

function baseSchemaShape(
  program: AnalysisProgram,
  method: string,
  args: ts.NodeArray<ts.Expression>,
  seen: Set<ts.Node>,
): ValueShape {
  if (PRIMITIVE_SCHEMAS.has(method)) return PRIMITIVE;
  if (method === 'date') return { kind: 'date' };
  if (method === 'promise') return { kind: 'promise' };
  if (KEYED_SCHEMAS.has(method)) return { kind: 'object', fields: null };
  if (WRAPPING_SCHEMAS.has(method)) return schemaShape(program, args[0] ?? null, seen);
  if (method === 'array') return { kind: 'array', element: schemaShape(program, args[0] ?? null, seen) };
  const list = (argument: ts.Expression | undefined): ValueShape[] => {
    const value = argument === undefined ? undefined : skipWrappers(argument);
    return value !== undefined && ts.isArrayLiteralExpression(value)
      ? value.elements.map((e) => schemaShape(program, e, seen))
      : [UNKNOWN];
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
    declaration =
      resolveImportedDeclaration(
        program,
        identifier.getSourceFile().fileName,
        binding.specifier,
        binding.importedName,
      ) ?? undefined;
  }
  if (declaration === undefined || !ts.isVariableDeclaration(declaration) || declaration.initializer === undefined)
    return null;
  return (ts.getCombinedNodeFlags(declaration) & ts.NodeFlags.Const) !== 0 ? declaration.initializer : null;
}
