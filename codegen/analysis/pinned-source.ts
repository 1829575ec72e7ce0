// Pinning a part of a declaration (a schema, a key, a request) by its source: the part's text
// plus the text of every declaration it uses, transitively (same file or relative imports),
// each normalized so that comments and formatting do not count, hashed together. LF007 compares
// these hashes with the manifest's (codegen/model/pinned-parts.ts says what is pinned). The
// normalized text and the references followed come from one walk (normalized-source.ts).

import { createHash } from 'node:crypto';
import { ts } from 'ts-morph';
import { compareLocations, type SourceLocation } from '../model/source-location.js';
import { resolveRelativeModule, type AnalysisProgram } from './analysis-program.js';
import { importBindingOf, resolveImportedDeclaration } from './module-exports.js';
import { readSource } from './normalized-source.js';
import { bindingOwner, isTypeOnly, isWithin, skipWrappers, variableKeyword } from './syntax.js';

/** Why codegen cannot pin a part: what it refers to is not source codegen can read. */
export interface PinProblem {
  readonly node: ts.Node;
  readonly message: string;
}

/**
 * A pinned part: its hash and where each declaration pinned with it (transitively) is declared,
 * sorted — how LF007 points at a helper when a part's own text did not change.
 */
export type Pin =
  | { readonly hash: string; readonly uses: readonly SourceLocation[]; readonly problem?: undefined }
  | { readonly hash?: undefined; readonly problem: PinProblem };

/** What a part or a declaration it uses depends on: another declaration, an import from a package, or something unreadable. */
type Dependency =
  | { readonly kind: 'unit'; readonly node: ts.Node }
  | { readonly kind: 'package'; readonly text: string }
  | { readonly kind: 'unreadable'; readonly node: ts.Node; readonly name: string; readonly module: string };

const SOURCES = new WeakMap<AnalysisProgram, PinnedSources>();

/**
 * Pins parts of declarations in one program. A unit is a declaration a part uses (a module-level
 * const, function, class or enum, or a whole module for a namespace or default import); each
 * unit's text and dependencies are computed once per program, however many parts use it.
 */
export class PinnedSources {
  readonly #program: AnalysisProgram;
  readonly #units = new Map<ts.Node, { readonly text: string; readonly dependencies: readonly Dependency[] }>();
  /** Per file: the value declarations of its top level (imports included), by name. */
  readonly #topLevel = new Map<ts.SourceFile, ReadonlyMap<string, readonly ts.Declaration[]>>();

  private constructor(program: AnalysisProgram) {
    this.#program = program;
  }

  /** The one instance for `program`. */
  static of(program: AnalysisProgram): PinnedSources {
    let sources = SOURCES.get(program);
    if (sources === undefined) SOURCES.set(program, (sources = new PinnedSources(program)));
    return sources;
  }

  /**
   * Pins `value` (a property's value, or a method): the hash of its normalized text and of every
   * unit it uses. When the value is a bare name (`input: OrderInput`), that name must be a const,
   * function or class declared in the project; `subject` (`the input schema of workflow "orders"`)
   * is how a problem's message names the part.
   */
  pin(value: ts.Node, subject: string): Pin {
    const reference = this.#referenceProblem(value, subject);
    if (reference !== null) return { problem: reference };
    const read = this.#read(value);
    const texts = new Set<string>();
    const seen = new Set<ts.Node>();
    const pending = [...read.dependencies];
    while (pending.length > 0) {
      const dependency = pending.pop()!;
      if (dependency.kind === 'package') {
        texts.add(dependency.text);
        continue;
      }
      if (dependency.kind === 'unreadable') {
        return {
          problem: {
            node: dependency.node,
            message:
              `${subject} uses \`${dependency.name}\`, imported from "${dependency.module}", which codegen cannot find as a TypeScript module of this project: ` +
              'codegen pins what a run depends on by its source text — import it from a .ts file.',
          },
        };
      }
      if (seen.has(dependency.node)) continue;
      seen.add(dependency.node);
      const unit = this.#unit(dependency.node);
      texts.add(unit.text);
      pending.push(...unit.dependencies);
    }
    const canonical = [read.text, ...[...texts].sort()].join('\n');
    const uses = [...seen]
      .map((unit) =>
        ts.isSourceFile(unit)
          ? { file: this.#program.relativePath(unit.fileName), line: 1, col: 1 }
          : this.#program.location(unit),
      )
      .sort(compareLocations);
    return { hash: createHash('sha256').update(canonical).digest('hex').slice(0, 16), uses };
  }

  /** A value that is only a name (`OrderInput`, `schemas.order`) must name something codegen can read, and a const. */
  #referenceProblem(value: ts.Node, subject: string): PinProblem | null {
    const bare = ts.isShorthandPropertyAssignment(value)
      ? value.name
      : ts.isExpression(value)
        ? skipWrappers(value)
        : null;
    let root: ts.Expression | null = bare;
    while (root !== null && ts.isPropertyAccessExpression(root)) root = skipWrappers(root.expression);
    if (root === null || !ts.isIdentifier(root)) return null;
    const name = root.text;
    const declarations = this.#valueDeclarations(root);
    if (declarations.length === 0) {
      return {
        node: value,
        message: `${subject} is \`${name}\`, which is declared neither in this file nor in a relative import: codegen pins it by its source text — declare it in one of them.`,
      };
    }
    for (const declaration of declarations) {
      const binding = importBindingOf(declaration);
      if (binding !== null && !binding.specifier.startsWith('.')) {
        return {
          node: value,
          message:
            `${subject} is \`${name}\`, imported from package "${binding.specifier}": codegen pins it by its source text and cannot read a package's — ` +
            'declare it in this project (this file or a relative import), so that a change to it is seen.',
        };
      }
      if (ts.isVariableDeclaration(declaration) && variableKeyword(declaration) !== 'const') {
        return {
          node: value,
          message: `${subject} is \`${name}\`, declared with ${variableKeyword(declaration)}: codegen pins it by its declaration, which only a const keeps — declare it with const.`,
        };
      }
    }
    return null;
  }

  /** The value declarations a name refers to (all of them: overloads, merged declarations); none for a global. */
  #valueDeclarations(identifier: ts.Identifier): ts.Declaration[] {
    const checker = this.#program.checker;
    const symbol =
      ts.isShorthandPropertyAssignment(identifier.parent) && identifier.parent.name === identifier
        ? checker.getShorthandAssignmentValueSymbol(identifier.parent)
        : checker.getSymbolAtLocation(identifier);
    return (symbol?.declarations ?? []).filter((d) => !isTypeOnly(d));
  }

  /** A unit's text (a variable with its keyword) and dependencies, once per program. */
  #unit(unit: ts.Node): { readonly text: string; readonly dependencies: readonly Dependency[] } {
    let known = this.#units.get(unit);
    if (known === undefined) {
      const read = this.#read(unit);
      known = {
        text: ts.isVariableDeclaration(unit) ? `${variableKeyword(unit)} ${read.text}` : read.text,
        dependencies: read.dependencies,
      };
      this.#units.set(unit, known);
    }
    return known;
  }

  /**
   * `scope`'s normalized text, and every declaration outside it that a name read inside it refers
   * to. `scope` is at module level (a part of a workflow declaration, a module-level declaration
   * or a module), so a name it does not declare itself is either declared at the top level of its
   * file or a global: only names the file's top level declares are looked up, once per file
   * unless `scope` declares them too.
   */
  #read(scope: ts.Node): { readonly text: string; readonly dependencies: readonly Dependency[] } {
    const sourceFile = scope.getSourceFile();
    const topLevel = this.#topLevelOf(sourceFile);
    const read = readSource(scope, sourceFile, topLevel);
    const dependencies: Dependency[] = [];
    for (const identifier of read.references) {
      // Unless the scope redeclares the name, it means the top-level declaration (no checker needed).
      const shadowed = read.declared.has(identifier.text) || ts.isSourceFile(scope);
      const declarations = shadowed ? this.#valueDeclarations(identifier) : (topLevel.get(identifier.text) ?? []);
      dependencies.push(...this.#dependenciesOfName(identifier, declarations, scope));
    }
    return { text: read.text, dependencies };
  }

  #topLevelOf(sourceFile: ts.SourceFile): ReadonlyMap<string, readonly ts.Declaration[]> {
    let topLevel = this.#topLevel.get(sourceFile);
    if (topLevel === undefined) {
      topLevel = topLevelDeclarations(sourceFile);
      this.#topLevel.set(sourceFile, topLevel);
    }
    return topLevel;
  }

  #dependenciesOfName(
    identifier: ts.Identifier,
    declarations: readonly ts.Declaration[],
    scope: ts.Node,
  ): Dependency[] {
    const dependencies: Dependency[] = [];
    for (const declaration of declarations) {
      if (isWithin(declaration, scope)) continue;
      const binding = importBindingOf(declaration);
      if (binding === null) {
        dependencies.push({ kind: 'unit', node: unitOf(declaration) });
        continue;
      }
      if (!binding.specifier.startsWith('.')) {
        dependencies.push({
          kind: 'package',
          text: `import ${JSON.stringify(binding.specifier)} ${binding.importedName}`,
        });
        continue;
      }
      const fromFile = declaration.getSourceFile().fileName;
      const parent = identifier.parent;
      const member =
        (binding.importedName === '*' || binding.importedName === 'default') &&
        ts.isPropertyAccessExpression(parent) &&
        parent.expression === identifier
          ? parent.name.text
          : null;
      const exportName = binding.importedName === '*' ? member : binding.importedName;
      const target =
        exportName === null ? null : resolveImportedDeclaration(this.#program, fromFile, binding.specifier, exportName);
      if (target !== null) {
        dependencies.push({ kind: 'unit', node: unitOf(target) });
        continue;
      }
      // A namespace or default import, or an export codegen does not follow: the whole module.
      const moduleFile = resolveRelativeModule(fromFile, binding.specifier);
      const module = moduleFile === null ? undefined : this.#program.sourceFile(moduleFile);
      if (module === undefined) {
        dependencies.push({ kind: 'unreadable', node: identifier, name: identifier.text, module: binding.specifier });
      } else {
        dependencies.push({ kind: 'unit', node: module });
      }
    }
    return dependencies;
  }
}

/**
 * The value declarations a module's top level makes, by name: variables (each name of a
 * destructuring is its binding element), functions (every overload), classes, enums, namespaces
 * and imports. Types are left out: nothing in them runs.
 */
function topLevelDeclarations(sourceFile: ts.SourceFile): Map<string, ts.Declaration[]> {
  const declarations = new Map<string, ts.Declaration[]>();
  const add = (name: string, declaration: ts.Declaration): void => {
    const list = declarations.get(name);
    if (list === undefined) declarations.set(name, [declaration]);
    else list.push(declaration);
  };
  const addBinding = (name: ts.BindingName, declaration: ts.Declaration): void => {
    if (ts.isIdentifier(name)) add(name.text, declaration);
    else for (const element of name.elements) if (!ts.isOmittedExpression(element)) addBinding(element.name, element);
  };
  for (const statement of sourceFile.statements) {
    if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) addBinding(declaration.name, declaration);
    } else if (
      (ts.isFunctionDeclaration(statement) ||
        ts.isClassDeclaration(statement) ||
        ts.isEnumDeclaration(statement) ||
        ts.isModuleDeclaration(statement)) &&
      statement.name !== undefined &&
      ts.isIdentifier(statement.name)
    ) {
      add(statement.name.text, statement);
    } else if (ts.isImportEqualsDeclaration(statement)) {
      add(statement.name.text, statement);
    } else if (
      ts.isImportDeclaration(statement) &&
      statement.importClause !== undefined &&
      !statement.importClause.isTypeOnly
    ) {
      const clause = statement.importClause;
      if (clause.name !== undefined) add(clause.name.text, clause);
      const bindings = clause.namedBindings;
      if (bindings !== undefined) {
        if (ts.isNamespaceImport(bindings)) add(bindings.name.text, bindings);
        else for (const element of bindings.elements) if (!element.isTypeOnly) add(element.name.text, element);
      }
    }
  }
  return declarations;
}

/** The declaration whose text pins a name: a destructured const is its whole declaration. */
function unitOf(declaration: ts.Node): ts.Node {
  if (ts.isBindingElement(declaration)) return bindingOwner(declaration) ?? declaration;
  return declaration;
}
