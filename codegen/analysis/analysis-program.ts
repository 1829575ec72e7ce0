import { existsSync } from 'node:fs';
import path from 'node:path';
import { FileSystemRefreshResult, Project, ts } from 'ts-morph';
import { toPosix } from '../discovery/discover-workflow-files.js';
import type { SourceLocation } from '../model/source-location.js';

/**
 * The parsed sources plus a binder-level checker. Imports are not resolved and no lib is
 * loaded: codegen needs scopes (which declaration does this identifier mean?), never types,
 * so it never pays for type-checking the program — and never for loading zod's declarations.
 * Relative imports of the workflow files are added, transitively, so keys may use helpers and
 * constants from sibling modules.
 */
export class AnalysisProgram {
  readonly checker: ts.TypeChecker;
  readonly #root: string;
  readonly #project: Project;

  /**
   * `readText`, given, supplies a file's text before the disk is read (an editor's unsaved
   * buffers); it returns undefined for a file it does not hold.
   * @param cache the sources of an earlier program (`codegen --watch`): a file whose text did not
   *   change is not parsed again, and files this program no longer reaches are dropped from it.
   */
  constructor(
    root: string,
    absoluteFiles: readonly string[],
    readText?: (absoluteFile: string) => string | undefined,
    cache?: SourceCache,
  ) {
    this.#root = root;
    this.#project = cache?.project ?? createAnalysisProject();
    const pending = [...absoluteFiles];
    const seen = new Set<string>();
    while (pending.length > 0) {
      const file = pending.pop() as string;
      if (seen.has(file)) continue;
      seen.add(file);
      const text = readText?.(file);
      const sourceFile =
        text === undefined
          ? addOrRefresh(this.#project, file)
          : this.#project.createSourceFile(file, text, { overwrite: true }).compilerNode;
      if (sourceFile === undefined) continue;
      for (const specifier of relativeModuleSpecifiers(sourceFile)) {
        const target = resolveRelativeModule(file, specifier);
        if (target !== null && !seen.has(target)) pending.push(target);
      }
    }
    if (cache !== undefined) {
      for (const stale of this.#project.getSourceFiles()) {
        if (!seen.has(stale.getFilePath())) this.#project.removeSourceFile(stale);
      }
    }
    this.checker = this.#project.getTypeChecker().compilerObject;
  }

  sourceFile(absoluteFile: string): ts.SourceFile | undefined {
    return this.#project.getSourceFile(absoluteFile)?.compilerNode;
  }

  /** Every file the program parsed: the files it was given and the relative imports they reach. */
  sourceFiles(): ts.SourceFile[] {
    return this.#project.getSourceFiles().map((file) => file.compilerNode);
  }

  relativePath(absoluteFile: string): string {
    return toPosix(path.relative(this.#root, absoluteFile));
  }

  location(node: ts.Node): SourceLocation {
    const sourceFile = node.getSourceFile();
    const { line, character } = sourceFile.getLineAndCharacterOfPosition(node.getStart(sourceFile));
    return { file: this.relativePath(sourceFile.fileName), line: line + 1, col: character + 1 };
  }

  /** The declaration an identifier in expression position refers to, or undefined for a global. */
  declarationOf(identifier: ts.Identifier): ts.Declaration | undefined {
    const symbol =
      ts.isShorthandPropertyAssignment(identifier.parent) && identifier.parent.name === identifier
        ? this.checker.getShorthandAssignmentValueSymbol(identifier.parent)
        : this.checker.getSymbolAtLocation(identifier);
    return symbol?.declarations?.[0];
  }
}

/**
 * The parsed sources one codegen run leaves for the next, for `codegen --watch`: the next run
 * re-reads every file it reaches but parses only those whose text changed.
 *
 * @example
 * const cache = new SourceCache();
 * await runCodegen({ root, cache }); // parses everything
 * await runCodegen({ root, cache }); // parses what changed since
 */
export class SourceCache {
  /** @internal */
  readonly project: Project = createAnalysisProject();
}

function createAnalysisProject(): Project {
  return new Project({
    skipAddingFilesFromTsConfig: true,
    skipFileDependencyResolution: true,
    skipLoadingLibFiles: true,
    compilerOptions: { noLib: true, noResolve: true, allowJs: false, target: ts.ScriptTarget.ES2022 },
  });
}

/** The file parsed, reusing the project's copy when its text is unchanged; undefined if it vanished meanwhile. */
function addOrRefresh(project: Project, file: string): ts.SourceFile | undefined {
  const known = project.getSourceFile(file);
  if (known === undefined) return project.addSourceFileAtPath(file).compilerNode;
  // Unchanged text keeps the parsed tree; a file deleted since is removed from the project.
  return known.refreshFromFileSystemSync() === FileSystemRefreshResult.Deleted ? undefined : known.compilerNode;
}

function relativeModuleSpecifiers(sourceFile: ts.SourceFile): string[] {
  const specifiers: string[] = [];
  for (const statement of sourceFile.statements) {
    if ((ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) && statement.moduleSpecifier) {
      const specifier = statement.moduleSpecifier;
      if (ts.isStringLiteral(specifier) && specifier.text.startsWith('.')) specifiers.push(specifier.text);
    }
  }
  return specifiers;
}

/** Maps a relative ESM specifier (`./keys.js`) to the TypeScript file it names, if it exists. */
export function resolveRelativeModule(fromFile: string, specifier: string): string | null {
  const base = path.resolve(path.dirname(fromFile), specifier);
  const candidates = /\.(c|m)?js$/.test(base)
    ? [
        base
          .replace(/\.js$/, '.ts')
          .replace(/\.mjs$/, '.mts')
          .replace(/\.cjs$/, '.cts'),
        base.replace(/\.js$/, '.tsx'),
      ]
    : /\.(c|m)?tsx?$/.test(base)
      ? [base]
      : [`${base}.ts`, `${base}.tsx`, path.join(base, 'index.ts')];
  for (const candidate of candidates) {
    if (!candidate.split(path.sep).includes('node_modules') && existsSync(candidate)) return candidate;
  }
  return null;
}
