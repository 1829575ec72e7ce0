// Reading one property of a declaration's object literal (workflow options, a step config, a
// queue use) without running anything: the value it assigns, the function it names, and the pin
// of the part it declares. Shared by the readers of workflows, steps and queue uses.

import { ts } from 'ts-morph';
import type { PartKind, PinnedPart } from '../model/pinned-parts.js';
import type { MalformedDeclaration } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import { importBindingOf, resolveImportedDeclaration } from './module-exports.js';
import { PinnedSources } from './pinned-source.js';
import { constFunction, skipWrappers, type FunctionLike } from './syntax.js';

/**
 * Pins the part a property declares (its value; a method is its own value), or reports as
 * malformed (LF008) that codegen cannot read what it refers to.
 */
export function pinPart(
  program: AnalysisProgram,
  property: ts.ObjectLiteralElementLike,
  kind: PartKind,
  step: string | null,
  subject: string,
  malformed: MalformedDeclaration[],
): PinnedPart | null {
  const value = ts.isPropertyAssignment(property) ? property.initializer : property;
  const pin = PinnedSources.of(program).pin(value, subject);
  if (pin.problem !== undefined) {
    malformed.push({ location: program.location(pin.problem.node), message: pin.problem.message });
    return null;
  }
  return { kind, step, hash: pin.hash, location: program.location(property.name ?? property), uses: pin.uses };
}

/** The value a property assigns (`name` itself for a shorthand `{ name }`); null for methods, accessors and spreads. */
export function assignedValue(property: ts.ObjectLiteralElementLike): ts.Expression | null {
  if (ts.isPropertyAssignment(property)) return property.initializer;
  if (ts.isShorthandPropertyAssignment(property)) return property.name;
  return null;
}

/** Source text of a property's value, when it is written as `name: value`. */
export function initializerText(property: ts.ObjectLiteralElementLike | undefined): string | null {
  return property !== undefined && ts.isPropertyAssignment(property) ? property.initializer.getText() : null;
}

/** The function a property names; 'absent' for `undefined`; null when it is not statically a function. */
export function resolveFunction(
  program: AnalysisProgram,
  property: ts.ObjectLiteralElementLike,
): FunctionLike | 'absent' | null {
  if (ts.isMethodDeclaration(property)) return property;
  let value: ts.Expression;
  if (ts.isPropertyAssignment(property)) value = skipWrappers(property.initializer);
  else if (ts.isShorthandPropertyAssignment(property)) value = property.name;
  else return null;
  if (ts.isArrowFunction(value) || ts.isFunctionExpression(value)) return value;
  if (!ts.isIdentifier(value)) return null;
  const declaration = program.declarationOf(value);
  if (declaration === undefined) return value.text === 'undefined' ? 'absent' : null;
  return functionOfDeclaration(program, declaration);
}

function functionOfDeclaration(program: AnalysisProgram, declaration: ts.Declaration): FunctionLike | null {
  if (ts.isFunctionDeclaration(declaration)) return declaration.body === undefined ? null : declaration;
  if (ts.isVariableDeclaration(declaration)) return constFunction(declaration);
  const binding = importBindingOf(declaration);
  if (binding === null) return null;
  const target = resolveImportedDeclaration(
    program,
    declaration.getSourceFile().fileName,
    binding.specifier,
    binding.importedName,
  );
  return target === null ? null : functionOfDeclaration(program, target);
}
