import { readFileSync } from 'node:fs';
import path from 'node:path';
import { glob, globSync, type GlobOptions } from 'tinyglobby';

export const DEFAULT_INCLUDE = ['**/*.workflow.ts'] as const;
export const DEFAULT_OUT_DIR = 'generated';

export interface DiscoveryOptions {
  /** Absolute directory that globs and reported paths are relative to. */
  readonly root: string;
  readonly include: readonly string[];
  /** Output directory relative to the root; never searched (it holds generated code, not declarations). */
  readonly outDir: string;
}

/**
 * Finds workflow declaration files under the root. Besides the output directory it skips
 * dependencies and the embedded database; inside the ledgerflow repository itself it also skips
 * the codegen golden cases, which are deliberately broken inputs for tests, not workflows.
 *
 * @example
 * const files = await discoverWorkflowFiles({ root: process.cwd(), include: ['**\/*.workflow.ts'], outDir: 'generated' });
 * // ['examples/order-payment/order-payment.workflow.ts', ...] (relative, sorted)
 */
export async function discoverWorkflowFiles(options: DiscoveryOptions): Promise<string[]> {
  return (await glob([...options.include], workflowGlobOptions(options))).map(toPosix).sort();
}

/** `discoverWorkflowFiles` for callers that cannot wait (the TypeScript language-service plugin). */
export function discoverWorkflowFilesSync(options: DiscoveryOptions): string[] {
  return globSync([...options.include], workflowGlobOptions(options))
    .map(toPosix)
    .sort();
}

function workflowGlobOptions(options: DiscoveryOptions): GlobOptions {
  return {
    cwd: options.root,
    ignore: discoveryIgnore(options.root, options.outDir),
    onlyFiles: true,
    followSymbolicLinks: false,
    expandDirectories: false,
  };
}

/**
 * What discovery never searches: dependencies, git's and the embedded database's directories,
 * the output directory and, inside the ledgerflow repository itself, the codegen golden cases.
 */
export function discoveryIgnore(root: string, outDir: string): string[] {
  const ignore = ['**/node_modules/**', '**/.git/**', '.ledgerflow/**', `${toPosix(outDir).replace(/\/$/, '')}/**`];
  if (isLedgerflowRepository(root)) ignore.push('tests/codegen/cases/**');
  return ignore;
}

function isLedgerflowRepository(root: string): boolean {
  try {
    const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { name?: unknown };
    return manifest.name === 'ledgerflow';
  } catch {
    return false;
  }
}

export function toPosix(file: string): string {
  return file.split(path.sep).join('/');
}
