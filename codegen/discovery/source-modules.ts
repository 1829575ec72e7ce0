import { glob, globSync, type GlobOptions } from 'tinyglobby';
import { discoveryIgnore, toPosix } from './discover-workflow-files.js';

/** TypeScript sources a module codegen reads besides the workflow files can be written in. */
const SOURCE_GLOBS = ['**/*.ts', '**/*.mts', '**/*.cts', '**/*.tsx'];

/** The specifier of an import or re-export that is not `import type` (a cheap look at a file's imports, without parsing it). */
const FROM_SPECIFIER = /\b(?:import|export)\s+(?!type\s)[^;]{0,2000}?\bfrom\s*(['"])([^'"\n]+)\1/g;

/**
 * Every TypeScript source under the root that discovery may search (not dependencies, not the
 * output directory, not `.d.ts`; inside the ledgerflow repository not the golden cases either),
 * relative, forward slashes.
 */
export async function discoverSourceModules(root: string, outDir: string): Promise<string[]> {
  return (await glob(SOURCE_GLOBS, sourceGlobOptions(root, outDir))).map(toPosix);
}

/** `discoverSourceModules` for callers that cannot wait (the TypeScript language-service plugin). */
export function discoverSourceModulesSync(root: string, outDir: string): string[] {
  return globSync(SOURCE_GLOBS, sourceGlobOptions(root, outDir)).map(toPosix);
}

function sourceGlobOptions(root: string, outDir: string): GlobOptions {
  return {
    cwd: root,
    ignore: [...discoveryIgnore(root, outDir), '**/*.d.ts', '**/*.d.mts', '**/*.d.cts'],
    onlyFiles: true,
    followSymbolicLinks: false,
    expandDirectories: false,
  };
}

/** The specifiers a module's text imports or re-exports values from, in order. */
export function* importSpecifiers(text: string): Generator<string> {
  for (const match of text.matchAll(FROM_SPECIFIER)) yield match[2] as string;
}
