// Syntax helpers shared by the analyses: questions about one TypeScript node (what wraps it,
// what it declares, whether it is read) that need no scopes, types or analysis state.

import { ts } from 'ts-morph';

/** A function whose body an analysis can walk. */
export type FunctionLike = ts.FunctionDeclaration | ts.FunctionExpression | ts.ArrowFunction | ts.MethodDeclaration;

export function isFunctionLike(node: ts.Node): node is FunctionLike {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node)
  );
}

/**
 * Expressions that wrap another without changing its value: `(x)`, `x as T`, `x satisfies T`,
 * `x!` and `<T>x`. The one list of them; every analysis looks through wrappers with it.
 */
export type Wrapper =
  | ts.ParenthesizedExpression
  | ts.AsExpression
  | ts.SatisfiesExpression
  | ts.NonNullExpression
  | ts.TypeAssertion;

export function isWrapper(node: ts.Node): node is Wrapper {
  return (
    ts.isParenthesizedExpression(node) ||
    ts.isAsExpression(node) ||
    ts.isSatisfiesExpression(node) ||
    ts.isNonNullExpression(node) ||
    ts.isTypeAssertionExpression(node)
  );
}

/** The expression inside any wrappers: `((x as T)!)` is `x`. */
export function skipWrappers(node: ts.Expression): ts.Expression {
  let current = node;
  while (isWrapper(current)) current = current.expression;
  return current;
}

/** The outermost wrapper around an expression (the expression itself when unwrapped), and its parent. */
export function outermostWrapper(node: ts.Node): { outer: ts.Node; parent: ts.Node } {
  let outer = node;
  while (isWrapper(outer.parent)) outer = outer.parent;
  return { outer, parent: outer.parent };
}

/** The member a property or element access names: `a.b` and `a['b']` are `b`, `a[0]` is `[0]`; null when computed. */
export function memberName(node: ts.Node): string | null {
  if (ts.isPropertyAccessExpression(node)) return node.name.text;
  if (ts.isElementAccessExpression(node)) {
    const argument = node.argumentExpression;
    if (ts.isStringLiteral(argument) || ts.isNoSubstitutionTemplateLiteral(argument)) return argument.text;
    if (ts.isNumericLiteral(argument)) return `[${argument.text}]`;
  }
  return null;
}

/** Whether `declaration` lies inside `scope` (in the same file). */
export function isWithin(declaration: ts.Node, scope: ts.Node): boolean {
  return (
    declaration.getSourceFile() === scope.getSourceFile() &&
    declaration.pos >= scope.pos &&
    declaration.end <= scope.end
  );
}

/** A type, type alias, interface or type parameter: nothing in it runs. */
export function isTypeOnly(node: ts.Node): boolean {
  return (
    ts.isTypeNode(node) ||
    ts.isTypeAliasDeclaration(node) ||
    ts.isInterfaceDeclaration(node) ||
    ts.isTypeParameterDeclaration(node)
  );
}

/** Whether an identifier names a value being read (not a declaration, property name or label). */
export function isReference(identifier: ts.Identifier): boolean {
  const parent = identifier.parent;
  if (ts.isPropertyAccessExpression(parent)) return parent.expression === identifier;
  if (ts.isShorthandPropertyAssignment(parent)) return true;
  if (
    ts.isPropertyAssignment(parent) ||
    ts.isMethodDeclaration(parent) ||
    ts.isPropertyDeclaration(parent) ||
    ts.isGetAccessorDeclaration(parent) ||
    ts.isSetAccessorDeclaration(parent) ||
    ts.isEnumMember(parent)
  ) {
    return parent.name !== identifier;
  }
  if (ts.isBindingElement(parent)) return parent.name !== identifier && parent.propertyName !== identifier;
  if (
    ts.isVariableDeclaration(parent) ||
    ts.isParameter(parent) ||
    ts.isFunctionDeclaration(parent) ||
    ts.isFunctionExpression(parent) ||
    ts.isClassDeclaration(parent) ||
    ts.isClassExpression(parent)
  ) {
    return parent.name !== identifier;
  }
  return !(
    ts.isLabeledStatement(parent) ||
    ts.isBreakOrContinueStatement(parent) ||
    ts.isMetaProperty(parent) ||
    ts.isImportSpecifier(parent) ||
    ts.isExportSpecifier(parent) ||
    ts.isQualifiedName(parent)
  );
}

/** The declaration (variable, parameter) a destructuring element belongs to. */
export function bindingOwner(element: ts.BindingElement): ts.Node | null {
  let node: ts.Node = element;
  while (ts.isBindingElement(node) || ts.isObjectBindingPattern(node) || ts.isArrayBindingPattern(node))
    node = node.parent;
  return node;
}

/** The name of a declaration (of the variable an arrow function or function expression is assigned to), else the declaration. */
export function declarationNameNode(declaration: ts.Node): ts.Node {
  if (
    (ts.isFunctionDeclaration(declaration) ||
      ts.isVariableDeclaration(declaration) ||
      ts.isParameter(declaration) ||
      ts.isMethodDeclaration(declaration)) &&
    declaration.name !== undefined
  ) {
    return declaration.name;
  }
  if (
    (ts.isArrowFunction(declaration) || ts.isFunctionExpression(declaration)) &&
    ts.isVariableDeclaration(declaration.parent)
  ) {
    return declaration.parent.name;
  }
  return declaration;
}

/**
 * An object or array literal, whatever wraps it, can be mutated by any module that sees it,
 * unless it is frozen with `as const` (or `<const>`).
 */
export function isMutableLiteral(initializer: ts.Expression): boolean {
  let node = initializer;
  while (isWrapper(node)) {
    if (isConstAssertion(node)) return false;
    node = node.expression;
  }
  return ts.isObjectLiteralExpression(node) || ts.isArrayLiteralExpression(node);
}

function isConstAssertion(node: Wrapper): boolean {
  return (
    (ts.isAsExpression(node) || ts.isTypeAssertionExpression(node)) &&
    ts.isTypeReferenceNode(node.type) &&
    node.type.typeName.getText() === 'const'
  );
}

/** The literal name of an object literal property; null when computed. */
export function propertyName(property: ts.ObjectLiteralElementLike): string | null {
  const name = property.name;
  if (name === undefined) return null;
  if (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  return null;
}

export function hasExportModifier(node: ts.Node): boolean {
  return ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
}

/** The function a `const` is initialised with (`const f = (x) => ...`); null for anything else. */
export function constFunction(declaration: ts.VariableDeclaration): FunctionLike | null {
  if (variableKeyword(declaration) !== 'const' || declaration.initializer === undefined) return null;
  const initializer = skipWrappers(declaration.initializer);
  return isFunctionLike(initializer) ? initializer : null;
}

/** `const`, `let` or `var` for a variable declaration. */
export function variableKeyword(declaration: ts.VariableDeclaration): 'const' | 'let' | 'var' {
  const flags = declaration.parent.flags;
  if (flags & ts.NodeFlags.Const) return 'const';
  if (flags & ts.NodeFlags.Let) return 'let';
  return 'var';
}

/** The exported name of the module-level const whose initializer is `expression`, if any. */
export function exportedConstName(expression: ts.Expression): string | null {
  const declaration = expression.parent;
  if (
    !ts.isVariableDeclaration(declaration) ||
    declaration.initializer !== expression ||
    !ts.isIdentifier(declaration.name)
  ) {
    return null;
  }
  if (variableKeyword(declaration) !== 'const') return null;
  const statement = declaration.parent.parent;
  if (!ts.isVariableStatement(statement) || !ts.isSourceFile(statement.parent)) return null;
  const localName = declaration.name.text;
  if (hasExportModifier(statement)) return localName;
  for (const other of statement.parent.statements) {
    if (ts.isExportDeclaration(other) && other.moduleSpecifier === undefined && !other.isTypeOnly) {
      const clause = other.exportClause;
      if (clause === undefined || !ts.isNamedExports(clause)) continue;
      const element = clause.elements.find((e) => (e.propertyName ?? e.name).text === localName);
      if (element !== undefined) return element.name.text;
    }
  }
  return null;
}

const MAX_TEXT = 80;

/** A node's source text on one line, cut to 80 characters, for messages. */
export function shortText(node: ts.Node): string {
  const text = node.getText().replace(/\s+/g, ' ');
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT - 1)}…` : text;
}
