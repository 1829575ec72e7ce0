// Roots: which part of the analysed function's context a value is derived from. The context
// parameter is the root of everything it offers; property reads narrow it (`ctx.steps.load.id`
// is step `load`, path `id`). Anything computed (a call result, a literal) has no root.

import { ts } from 'ts-morph';
import type { ContextDescription } from '../model/purity.js';
import type { AnalysisProgram } from './analysis-program.js';
import { isWithin, memberName, skipWrappers } from './syntax.js';

/**
 * What a value is derived from. The context root carries what the context offers, so that a
 * helper's analysis (memoised by its parameters' roots) differs between different contexts.
 */
export type Root =
  | { readonly kind: 'ctx'; readonly data: readonly string[]; readonly steps: boolean }
  | { readonly kind: 'data'; readonly property: string; readonly path: string }
  | { readonly kind: 'steps' }
  | { readonly kind: 'step'; readonly step: string; readonly path: string }
  | { readonly kind: 'steps-dynamic' }
  /** A rest parameter (`(...args) => args[0].input.id`): its first element is the context. */
  | { readonly kind: 'rest'; readonly first: Root };

/** A function (or module-const initializer) being analysed, with the roots its parameters are bound to. */
export interface BoundScope {
  readonly scope: ts.Node;
  readonly bindings: ReadonlyMap<ts.ParameterDeclaration, Root>;
}

/** The root of a context parameter that offers what `context` describes. */
export function contextRoot(context: ContextDescription): Root {
  return { kind: 'ctx', data: [...context.data], steps: context.steps !== null };
}

/** The root the analysed function's first parameter holds: the context, or for a rest parameter the list it is the first of. */
export function parameterRoot(parameter: ts.ParameterDeclaration, context: ContextDescription): Root {
  const root = contextRoot(context);
  return parameter.dotDotDotToken === undefined ? root : { kind: 'rest', first: root };
}

/** The root of `expression` inside `frame`, or null when it is not derived from the context. */
export function rootOf(program: AnalysisProgram, expression: ts.Expression, frame: BoundScope): Root | null {
  const node = skipWrappers(expression);
  if (ts.isIdentifier(node)) {
    const declaration = program.declarationOf(node);
    if (declaration === undefined || !isWithin(declaration, frame.scope)) return null;
    return rootOfDeclaration(program, declaration, frame, new Set());
  }
  if (ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) {
    const parent = rootOf(program, node.expression, frame);
    return parent === null ? null : childRoot(parent, memberName(node));
  }
  return null;
}

/** The root a parameter, destructured element or local variable declared inside `frame` holds. */
export function rootOfDeclaration(
  program: AnalysisProgram,
  declaration: ts.Declaration,
  frame: BoundScope,
  seen: Set<ts.Node>,
): Root | null {
  if (seen.has(declaration)) return null;
  seen.add(declaration);
  if (ts.isParameter(declaration)) return frame.bindings.get(declaration) ?? null;
  if (ts.isBindingElement(declaration)) {
    const pattern = declaration.parent;
    const owner = pattern.parent;
    let parent: Root | null = null;
    if (ts.isParameter(owner)) parent = frame.bindings.get(owner) ?? null;
    else if (ts.isVariableDeclaration(owner))
      parent = owner.initializer === undefined ? null : rootOf(program, owner.initializer, frame);
    else if (ts.isBindingElement(owner)) parent = rootOfDeclaration(program, owner, frame, seen);
    if (parent === null) return null;
    if (declaration.dotDotDotToken !== undefined) return parent;
    if (ts.isArrayBindingPattern(pattern)) return childRoot(parent, `[${pattern.elements.indexOf(declaration)}]`);
    const property = declaration.propertyName ?? declaration.name;
    return childRoot(parent, ts.isIdentifier(property) || ts.isStringLiteral(property) ? property.text : null);
  }
  if (
    ts.isVariableDeclaration(declaration) &&
    declaration.initializer !== undefined &&
    ts.isIdentifier(declaration.name)
  ) {
    return rootOf(program, declaration.initializer, frame);
  }
  return null;
}

/** The root of `member` of a value with root `parent`; member null when computed. */
function childRoot(parent: Root, member: string | null): Root | null {
  switch (parent.kind) {
    case 'ctx':
      if (member !== null && parent.data.includes(member)) return { kind: 'data', property: member, path: '' };
      if (member === 'steps' && parent.steps) return { kind: 'steps' };
      return null;
    case 'data':
      if (member === null) return parent;
      return { kind: 'data', property: parent.property, path: joinPath(parent.path, member) };
    case 'steps':
      return member === null ? { kind: 'steps-dynamic' } : { kind: 'step', step: member, path: '' };
    case 'step':
      if (member === null) return parent;
      return { kind: 'step', step: parent.step, path: joinPath(parent.path, member) };
    case 'steps-dynamic':
      return parent;
    case 'rest':
      return member === '[0]' ? parent.first : null;
  }
}

function joinPath(path: string, member: string): string {
  if (member.startsWith('[')) return `${path}${member}`;
  return path === '' ? member : `${path}.${member}`;
}
