import { ts } from 'ts-morph';
import { resolveRelativeModule, type AnalysisProgram } from './analysis-program.js';
import { hasExportModifier } from './syntax.js';

/** An `import` binding: which module, and which export of it (`default`, `*` or a name). */
export interface ImportBinding {
  readonly specifier: string;
  readonly importedName: string;
  readonly declaration: ts.ImportSpecifier | ts.ImportClause | ts.NamespaceImport;
}

export function importBindingOf(declaration: ts.Declaration): ImportBinding | null {
  let importDeclaration: ts.ImportDeclaration | ts.JSDocImportTag;
  let importedName: string;
  if (ts.isImportSpecifier(declaration)) {
    importDeclaration = declaration.parent.parent.parent;
    importedName = (declaration.propertyName ?? declaration.name).text;
  } else if (ts.isImportClause(declaration)) {
    importDeclaration = declaration.parent;
    importedName = 'default';
  } else if (ts.isNamespaceImport(declaration)) {
    importDeclaration = declaration.parent.parent;
    importedName = '*';
  } else {
    return null;
  }
  const specifier = importDeclaration.moduleSpecifier;
  if (!ts.isStringLiteral(specifier)) return null;
  return { specifier: specifier.text, importedName, declaration };
}

/** The binding of `import * as ns` or of a default import, whose members a use reads; null for anything else. */
export function namespaceImportOf(declaration: ts.Declaration): ImportBinding | null {
  const binding = importBindingOf(declaration);
  return binding !== null && (binding.importedName === '*' || binding.importedName === 'default') ? binding : null;
}

/** A declaration another module exports under some name. */
export type ExportedDeclaration =
  | ts.VariableDeclaration
  | ts.FunctionDeclaration
  | ts.ClassDeclaration
  | ts.EnumDeclaration;

/**
 * Follows a relative import to the declaration it binds, through `export { a as b }` and
 * re-exports. Returns null for packages and anything it cannot see statically.
 */
export function resolveImportedDeclaration(
  program: AnalysisProgram,
  fromFile: string,
  specifier: string,
  exportName: string,
  depth = 0,
): ExportedDeclaration | null {
  if (!specifier.startsWith('.') || depth > 16 || exportName === '*' || exportName === 'default') return null;
  const targetFile = resolveRelativeModule(fromFile, specifier);
  const target = targetFile === null ? undefined : program.sourceFile(targetFile);
  if (target === undefined) return null;
  return findExport(program, target, exportName, depth);
}

function findExport(
  program: AnalysisProgram,
  sourceFile: ts.SourceFile,
  name: string,
  depth: number,
): ExportedDeclaration | null {
  for (const statement of sourceFile.statements) {
    if (hasExportModifier(statement)) {
      const local = declarationNamed(statement, name);
      if (local !== null) return local;
    }
    if (ts.isExportDeclaration(statement) && !statement.isTypeOnly) {
      const from = statement.moduleSpecifier;
      const clause = statement.exportClause;
      if (clause !== undefined && ts.isNamedExports(clause)) {
        for (const element of clause.elements) {
          if (element.name.text !== name) continue;
          const localName = (element.propertyName ?? element.name).text;
          if (from !== undefined && ts.isStringLiteral(from)) {
            return resolveImportedDeclaration(program, sourceFile.fileName, from.text, localName, depth + 1);
          }
          return findLocal(program, sourceFile, localName, depth);
        }
      } else if (clause === undefined && from !== undefined && ts.isStringLiteral(from)) {
        const found = resolveImportedDeclaration(program, sourceFile.fileName, from.text, name, depth + 1);
        if (found !== null) return found;
      }
    }
  }
  return null;
}

function findLocal(
  program: AnalysisProgram,
  sourceFile: ts.SourceFile,
  name: string,
  depth: number,
): ExportedDeclaration | null {
  for (const statement of sourceFile.statements) {
    const local = declarationNamed(statement, name);
    if (local !== null) return local;
    if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier)) {
      const bindings = statement.importClause?.namedBindings;
      if (bindings !== undefined && ts.isNamedImports(bindings)) {
        const element = bindings.elements.find((e) => e.name.text === name);
        if (element !== undefined) {
          const imported = (element.propertyName ?? element.name).text;
          return resolveImportedDeclaration(
            program,
            sourceFile.fileName,
            statement.moduleSpecifier.text,
            imported,
            depth + 1,
          );
        }
      }
    }
  }
  return null;
}

function declarationNamed(statement: ts.Statement, name: string): ExportedDeclaration | null {
  if (ts.isVariableStatement(statement)) {
    return statement.declarationList.declarations.find((d) => ts.isIdentifier(d.name) && d.name.text === name) ?? null;
  }
  if (
    (ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement) || ts.isEnumDeclaration(statement)) &&
    statement.name?.text === name
  ) {
    // An overload signature has no body; the implementation is the last declaration of the name.
    if (ts.isFunctionDeclaration(statement) && statement.body === undefined) return null;
    return statement;
  }
  return null;
}
