import { existsSync, readFileSync } from 'node:fs';
import { dirname, extname, isAbsolute, join, relative } from 'node:path';

/**
 * A module the user named on the command line that node (or tsx) cannot load as it stands: a
 * syntax error, or a package.json that makes an ES module CommonJS. The user fixes a file, not
 * the command line, yet nothing ran: one line with the fix, exit code 2, no loader's stack.
 */
export class UserModuleError extends Error {
  override readonly name = 'UserModuleError';
}

/**
 * Node's ways of saying that it loaded an ES module as CommonJS (and `require()`d what it
 * imports), as an error code or, from the parser, as a SyntaxError's message.
 */
const COMMONJS_CODES = new Set(['ERR_REQUIRE_CYCLE_MODULE', 'ERR_REQUIRE_ESM', 'ERR_REQUIRE_ASYNC_MODULE']);
const COMMONJS_SYNTAX = [
  'Cannot use import statement outside a module',
  "Unexpected token 'export'",
  "Cannot use 'import.meta' outside a module",
  'await is only valid in async functions and the top level bodies of modules',
];
/** The extensions whose module format package.json's "type" decides (.mts/.cts/.mjs/.cjs say it themselves). */
const TYPE_DECIDES = new Set(['.js', '.jsx', '.ts', '.tsx']);
/** How esbuild (through tsx) reports a syntax error: `Transform failed with N error(s):\n<file>:<line>:<column>: ERROR: <text>`. */
const ESBUILD_ERROR = /^(.+):(\d+):(\d+): ERROR: (.+)$/m;
const ESBUILD_COUNT = /^Transform failed with (\d+) errors?:/;

/**
 * The one-line explanation of why importing `file` (`named` as the user wrote it, e.g.
 * `--workflows generated/index.ts`) failed, when the cause is one the user fixes in a file;
 * undefined for any other error (the module's own code threw: its stack is worth showing).
 *
 * @example
 * explainImportFailure(transformError, '/app/generated/index.ts', '--workflows generated/index.ts');
 * // UserModuleError: src/a.workflow.ts:3:18: syntax error: Unexpected ";" (loading --workflows generated/index.ts). Fix it …
 */
export function explainImportFailure(error: unknown, file: string, named: string): UserModuleError | undefined {
  return syntaxError(error, named) ?? commonJsScope(error, file, named);
}

function syntaxError(error: unknown, named: string): UserModuleError | undefined {
  if (!(error instanceof Error) || error.name !== 'TransformError') return undefined;
  const first = ESBUILD_ERROR.exec(error.message);
  if (first === null) return undefined;
  const [, file, line, column, text] = first as unknown as [string, string, string, string, string];
  const count = Number(ESBUILD_COUNT.exec(error.message)?.[1] ?? 1);
  const more = count > 1 ? ` and ${count - 1} more` : '';
  // esbuild counts columns from 0; editors, tsc and node from 1.
  return new UserModuleError(
    `${shown(file)}:${line}:${Number(column) + 1}: syntax error: ${text}${more} (loading ${named}). Fix it and run the command again.`,
  );
}

function commonJsScope(error: unknown, file: string, named: string): UserModuleError | undefined {
  if (!TYPE_DECIDES.has(extname(file))) return undefined;
  const code = nodeCode(error);
  const message = error instanceof Error ? error.message : '';
  if (code === undefined && !COMMONJS_SYNTAX.some((text) => message.includes(text))) return undefined;
  const scope = packageScope(file);
  if (scope === undefined || scope.type === 'module') return undefined;
  const declared =
    scope.type === undefined ? 'no "type" (CommonJS by default)' : `"type": ${JSON.stringify(scope.type)}`;
  return new UserModuleError(
    `${named} is an ES module, but ${shown(scope.file)} has ${declared}, so node loads it as CommonJS` +
      `${code === undefined ? '' : ` (${code})`}. Set "type": "module" in ${shown(scope.file)} (npm pkg set type=module) and run the command again.`,
  );
}

/** The code of the first error in the `cause` chain that node marked as loading ESM through require(). */
function nodeCode(error: unknown): string | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth += 1) {
    const code = (current as NodeJS.ErrnoException).code;
    if (code !== undefined && COMMONJS_CODES.has(code)) return code;
  }
  return undefined;
}

/** The package.json that decides `file`'s module format (the nearest one above it), and its "type". */
function packageScope(file: string): { file: string; type: unknown } | undefined {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        return { file: manifest, type: (JSON.parse(readFileSync(manifest, 'utf8')) as { type?: unknown }).type };
      } catch {
        return undefined;
      }
    }
    if (dirname(dir) === dir) return undefined;
  }
}

/** A path as the user would type it: relative to the working directory when it is below it. */
function shown(file: string): string {
  const fromHere = relative(process.cwd(), file);
  return fromHere !== '' && !fromHere.startsWith('..') && !isAbsolute(fromHere) ? fromHere.split('\\').join('/') : file;
}
