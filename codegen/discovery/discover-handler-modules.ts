import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CONTRACTS_DIR, INDEX_FILE } from '../emit/generated-file.js';
import { discoverSourceModules, discoverSourceModulesSync, importSpecifiers } from './source-modules.js';

export interface HandlerDiscoveryOptions {
  /** Absolute directory that globs and reported paths are relative to. */
  readonly root: string;
  /** Output directory relative to the root: where the contracts the handlers import live; never searched. */
  readonly outDir: string;
}

/**
 * Finds the modules that bind handlers through generated contracts: TypeScript sources under
 * the root (not dependencies, not the output directory, not `.d.ts`; inside the ledgerflow
 * repository not the golden cases either) that mention `Handlers` and import, by a relative
 * specifier, a contract module (`<outDir>/contracts/*`) or the generated index. A text
 * prefilter: nothing is parsed here, and a file that passes it may still bind nothing.
 *
 * @example
 * await discoverHandlerModules({ root: '/repo', outDir: 'generated' });
 * // ['examples/order-payment/handlers.ts', ...] (relative, sorted)
 */
export async function discoverHandlerModules(options: HandlerDiscoveryOptions): Promise<string[]> {
  return handlerModulesAmong(options, await discoverSourceModules(options.root, options.outDir));
}

/** `discoverHandlerModules` for callers that cannot wait (the TypeScript language-service plugin). */
export function discoverHandlerModulesSync(options: HandlerDiscoveryOptions): string[] {
  return handlerModulesAmong(options, discoverSourceModulesSync(options.root, options.outDir));
}

function handlerModulesAmong(options: HandlerDiscoveryOptions, files: readonly string[]): string[] {
  const generated = path.resolve(options.root, options.outDir);
  const found: string[] = [];
  // Synchronous reads: for a few hundred small files, several times faster than as many promises.
  for (const file of files) {
    const absolute = path.join(options.root, file);
    const text = readFileSync(absolute, 'utf8');
    if (text.includes('Handlers') && importsGeneratedContract(absolute, text, generated)) found.push(file);
  }
  return found.sort();
}

/** Whether the module imports from `<generated>/contracts/…` or `<generated>/index` by a relative specifier. */
function importsGeneratedContract(file: string, text: string, generated: string): boolean {
  for (const specifier of importSpecifiers(text)) {
    if (specifier.startsWith('.') && generatedModuleOf(file, specifier, generated) !== null) return true;
  }
  return false;
}

/** A module of the output directory a relative specifier names. */
export type GeneratedModule =
  | { readonly kind: 'contract'; readonly workflow: string; readonly version: number }
  | { readonly kind: 'index' };

/**
 * Which generated module a relative import specifier names, by path alone (the file need not
 * exist yet): `<generated>/contracts/<name>.v<N>.js` is workflow `name` version N; the output
 * directory itself or its `index.js` is the index, which re-exports every contract.
 */
export function generatedModuleOf(fromFile: string, specifier: string, generated: string): GeneratedModule | null {
  const target = path.resolve(path.dirname(fromFile), specifier);
  if (target === generated) return { kind: 'index' };
  const withoutExtension = target.replace(/\.(m|c)?(j|t)sx?$/, '');
  if (withoutExtension === path.join(generated, INDEX_FILE.replace(/\.ts$/, ''))) return { kind: 'index' };
  if (path.dirname(target) !== path.join(generated, CONTRACTS_DIR)) return null;
  const match = /^(.+)\.v([1-9][0-9]*)$/.exec(path.basename(withoutExtension));
  return match === null ? null : { kind: 'contract', workflow: match[1] as string, version: Number(match[2]) };
}
