import { extname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { UsageError } from './command.js';
import { explainImportFailure } from './user-module-error.js';

const TYPESCRIPT_EXTENSIONS = new Set(['.ts', '.mts', '.cts', '.tsx']);

/**
 * Whether this process can already import TypeScript: the CLI itself runs from `.ts` sources
 * (the repository, through tsx), or the user started node with a TypeScript loader.
 */
const runningTypeScript = import.meta.url.endsWith('.ts');
let tsxRegistered: Promise<void> | undefined;

/**
 * Imports a module the user named on the command line (`named`, for messages: `--workflows
 * generated/index.ts`). The installed CLI is plain JavaScript; a `.ts` module is loaded through
 * tsx, an optional peer dependency imported only then, with the fix in the error when it is missing.
 * A module that cannot load as it stands (a syntax error; an ES module in a CommonJS package)
 * becomes a {@link UserModuleError} naming the fix; any other failure is thrown as it is.
 */
export async function importUserModule(file: string, named: string): Promise<Record<string, unknown>> {
  if (TYPESCRIPT_EXTENSIONS.has(extname(file)) && !runningTypeScript) {
    tsxRegistered ??= registerTsx(named);
    await tsxRegistered;
  }
  try {
    return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (error) {
    throw explainImportFailure(error, file, named) ?? error;
  }
}

async function registerTsx(named: string): Promise<void> {
  let tsx: { register: () => unknown };
  try {
    tsx = (await import('tsx/esm/api')) as { register: () => unknown };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    throw new UsageError(
      `${named} is TypeScript, which ledgerflow loads through tsx (an optional peer dependency), and tsx is not installed. ` +
        'Run: npm install --save-dev tsx — or compile the module and pass the .js file.',
    );
  }
  tsx.register();
}
