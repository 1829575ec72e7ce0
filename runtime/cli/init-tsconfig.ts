/**
 * What `ledgerflow init` checks in an existing tsconfig.json: it must resolve package `exports`
 * (`ledgerflow/dsl`, `ledgerflow/runtime`), allow top-level await, and be strict (zod's inferred
 * types and the generated contracts need strictNullChecks). The package ships compiled code and
 * declarations that compile under `exactOptionalPropertyTypes` and `skipLibCheck: false`
 * (tests/package/pack-install.test.ts), so neither is asked for. The file itself is never edited: it may have comments, an
 * `extends` chain and the owner's formatting, so init prints the lines to set instead.
 */

/** The effective compiler options that matter here, lower-cased as TypeScript names them (`nodenext`, `es2022`). */
export interface TsconfigSettings {
  readonly module: string | undefined;
  readonly moduleResolution: string | undefined;
  readonly target: string | undefined;
  /** Entries as written, e.g. `es2023`, `dom`; undefined when not set (the target's default). */
  readonly lib: readonly string[] | undefined;
  readonly strict: boolean | undefined;
}

/** One compiler option to set: the line to put under `compilerOptions`, and why. */
export interface TsconfigFix {
  readonly option: keyof TsconfigSettings;
  /** e.g. `"module": "NodeNext"`. */
  readonly line: string;
  /** What it is now, e.g. `"commonjs"` or `not set`. */
  readonly now: string;
  readonly reason: string;
}

const NODE_MODULES = new Set(['node16', 'node18', 'node20', 'nodenext']);
const ESM_MODULES = new Set(['es2022', 'esnext', 'preserve']);
/** ES2022 and later: top-level await, Error cause, Array.prototype.at. */
const MODERN_TARGETS = /^(es(202[2-9]|next)|latest)$/;
const MODERN_LIBS = /^es(202[2-9]|next)(\.full)?$/;

/**
 * The options to set, none when the settings suit ledgerflow.
 *
 * @example
 * checkTsconfig({ ...settings, module: 'commonjs' });
 * // [{ option: 'module', line: '"module": "NodeNext"', now: '"commonjs"', reason: '…' }]
 */
export function checkTsconfig(settings: TsconfigSettings): TsconfigFix[] {
  const fixes: TsconfigFix[] = [];
  const now = (value: unknown): string => (value === undefined ? 'not set' : JSON.stringify(value));
  const module = settings.module;
  const nodeModule = module !== undefined && NODE_MODULES.has(module);
  const bundlerModule = module !== undefined && ESM_MODULES.has(module) && settings.moduleResolution === 'bundler';
  if (!nodeModule && !bundlerModule) {
    fixes.push({
      option: 'module',
      line: '"module": "NodeNext"',
      now: now(module),
      reason: 'ESM with top-level await, resolving the `exports` of ledgerflow/dsl and ledgerflow/runtime',
    });
  }
  const resolution = settings.moduleResolution;
  if (!bundlerModule && resolution !== undefined && resolution !== 'node16' && resolution !== 'nodenext') {
    fixes.push({
      option: 'moduleResolution',
      line: '"moduleResolution": "NodeNext"',
      now: now(resolution),
      reason: 'goes with "module": "NodeNext"',
    });
  }
  if (settings.target === undefined || !MODERN_TARGETS.test(settings.target)) {
    fixes.push({
      option: 'target',
      line: '"target": "ES2022"',
      now: now(settings.target),
      reason: 'top-level await and the ES2022 library',
    });
  }
  if (settings.lib !== undefined && !settings.lib.some((lib) => MODERN_LIBS.test(lib))) {
    fixes.push({
      option: 'lib',
      line: `"lib": ${JSON.stringify([...settings.lib, 'ES2022'])}`,
      now: now(settings.lib),
      reason: 'the ES2022 library (Error cause, Array.prototype.at)',
    });
  }
  if (settings.strict !== true) {
    fixes.push({
      option: 'strict',
      line: '"strict": true',
      now: now(settings.strict),
      reason: "zod's inferred types and the generated contracts need strict mode",
    });
  }
  return fixes;
}

/** A tsconfig.json the TypeScript parser could not read: its messages. */
export class TsconfigReadError extends Error {
  override readonly name = 'TsconfigReadError';
}

/**
 * The settings of `file` with its `extends` chain applied, read by TypeScript's own parser
 * (comments and trailing commas allowed). Loads the compiler bundled with ts-morph on demand.
 */
export async function readTsconfigSettings(file: string): Promise<TsconfigSettings> {
  const { ts } = await import('ts-morph');
  const errors: string[] = [];
  const parsed = ts.getParsedCommandLineOfConfigFile(
    file,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => errors.push(ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    },
  );
  // TS18003 "No inputs were found" only means the project has no sources yet.
  for (const d of parsed?.errors ?? [])
    if (d.code !== 18003) errors.push(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  if (parsed === undefined || errors.length > 0) throw new TsconfigReadError(errors.join('; '));
  const options = parsed.options;
  const enumName = (names: Record<number, string>, value: number | undefined): string | undefined =>
    value === undefined ? undefined : names[value]?.toLowerCase();
  return {
    module: enumName(ts.ModuleKind, options.module),
    moduleResolution: enumName(ts.ModuleResolutionKind, options.moduleResolution),
    target: enumName(ts.ScriptTarget, options.target),
    // The parser turns "ES2023" into "lib.es2023.d.ts".
    lib: options.lib?.map((lib) => lib.replace(/^lib\./, '').replace(/\.d\.ts$/, '')),
    strict: options.strict,
  };
}
