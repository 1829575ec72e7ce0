import path from 'node:path';
import type { ts } from 'ts-morph';
import { toPosix } from '../discovery/discover-workflow-files.js';
import type { Diagnostic } from '../model/diagnostic.js';
import {
  checkProjectModules,
  discoverProjectModules,
  type ProjectCheckOptions,
  type ProjectModules,
} from './check-project.js';

/** The `typescript` module tsserver hands a plugin: the editor's, whatever its version (only its runtime objects are used). */
type TypeScriptModule = typeof ts;

/** What the text of an LF diagnostic is reported as in the editor: `ledgerflow(2)` for LF002. */
export const TS_DIAGNOSTIC_SOURCE = 'ledgerflow';

/**
 * The tsserver plugin: `{ "compilerOptions": { "plugins": [{ "name": "ledgerflow/ts-plugin" }] } }`
 * in a tsconfig adds codegen's LF diagnostics to the editor's, for the files codegen checks.
 * The entry may also say `root` (relative to the tsconfig's directory; default that directory),
 * `include` and `outDir`, as `ledgerflow codegen --root/--include/--out` would.
 *
 * tsserver calls the factory with its own `typescript` module; every language-service object
 * the plugin makes comes from that module, while the analysis itself runs on ts-morph's.
 *
 * @example
 * const plugin = tsPluginFactory({ typescript: ts }).create(info);
 * plugin.getSemanticDiagnostics('/repo/src/refund.workflow.ts'); // TypeScript's, then ledgerflow's
 */
export const tsPluginFactory: ts.server.PluginModuleFactory = ({ typescript }) => ({
  create: (info) => decorateLanguageService(typescript, info),
});

interface AnalysisCache {
  readonly version: string;
  modules?: ProjectModules;
  byFile?: ReadonlyMap<string, readonly Diagnostic[]>;
  /** Set once this version failed: logged once, not retried until the project changes. */
  failed: boolean;
}

function decorateLanguageService(typescript: TypeScriptModule, info: ts.server.PluginCreateInfo): ts.LanguageService {
  const languageService = info.languageService;
  const host = info.languageServiceHost;
  const log = (message: string): void => info.project.projectService.logger.info(`[ledgerflow/ts-plugin] ${message}`);
  let cache: AnalysisCache | undefined;

  function ledgerflowDiagnostics(fileName: string): readonly Diagnostic[] {
    const version = projectVersion(host);
    if (cache?.version !== version) cache = { version, failed: false };
    if (cache.failed) return [];
    try {
      cache.modules ??= discoverProjectModules(pluginOptions(info.config, host.getCurrentDirectory()));
      const file = toPosix(path.relative(cache.modules.root, fileName));
      if (!cache.modules.checked.has(file)) return [];
      cache.byFile ??= groupByFile(checkProjectModules(cache.modules, scriptTextReader(host)));
      return cache.byFile.get(file) ?? [];
    } catch (error) {
      cache.failed = true;
      log(`codegen's analysis failed, so only TypeScript's diagnostics are shown: ${describeError(error)}`);
      return [];
    }
  }

  return {
    ...languageService,
    getSemanticDiagnostics(fileName) {
      const original = languageService.getSemanticDiagnostics(fileName);
      try {
        const found = ledgerflowDiagnostics(fileName);
        const sourceFile = found.length === 0 ? undefined : languageService.getProgram()?.getSourceFile(fileName);
        if (sourceFile === undefined) return original;
        return [...original, ...found.map((diagnostic) => toTsDiagnostic(typescript, sourceFile, diagnostic))];
      } catch (error) {
        log(`could not report ledgerflow's diagnostics for ${fileName}: ${describeError(error)}`);
        return original;
      }
    },
  };
}

/** Reads the tsconfig entry; throws (and so is logged) when a field has the wrong type. */
function pluginOptions(config: unknown, projectDirectory: string): ProjectCheckOptions {
  const entry = (typeof config === 'object' && config !== null ? config : {}) as Record<string, unknown>;
  const { root, include, outDir } = entry;
  if (root !== undefined && typeof root !== 'string')
    throw new TypeError(`"root" in the plugin's tsconfig entry must be a directory path; got ${JSON.stringify(root)}.`);
  if (outDir !== undefined && typeof outDir !== 'string')
    throw new TypeError(
      `"outDir" in the plugin's tsconfig entry must be a directory path; got ${JSON.stringify(outDir)}.`,
    );
  if (include !== undefined && !(Array.isArray(include) && include.every((glob) => typeof glob === 'string'))) {
    throw new TypeError(
      `"include" in the plugin's tsconfig entry must be an array of globs; got ${JSON.stringify(include)}.`,
    );
  }
  return {
    root: path.resolve(projectDirectory, root ?? '.'),
    ...(include === undefined ? {} : { include: include as string[] }),
    ...(outDir === undefined ? {} : { outDir }),
  };
}

/** tsserver's project version changes with every edit; a bare host is keyed by its scripts' versions. */
function projectVersion(host: ts.LanguageServiceHost): string {
  return (
    host.getProjectVersion?.() ??
    host
      .getScriptFileNames()
      .map((file) => `${file}@${host.getScriptVersion(file)}`)
      .join('|')
  );
}

/** The editor's text of the project's files (unsaved edits included); other files are read from disk. */
function scriptTextReader(host: ts.LanguageServiceHost): (absoluteFile: string) => string | undefined {
  const scripts = new Map(host.getScriptFileNames().map((file) => [toPosix(path.resolve(file)), file]));
  return (absoluteFile) => {
    const file = scripts.get(toPosix(absoluteFile));
    const snapshot = file === undefined ? undefined : host.getScriptSnapshot(file);
    return snapshot?.getText(0, snapshot.getLength());
  };
}

function groupByFile(diagnostics: readonly Diagnostic[]): Map<string, Diagnostic[]> {
  const byFile = new Map<string, Diagnostic[]>();
  for (const diagnostic of diagnostics)
    byFile.set(diagnostic.file, [...(byFile.get(diagnostic.file) ?? []), diagnostic]);
  return byFile;
}

/**
 * An LF diagnostic as tsserver reports it: the CLI's message, `code` the LF number, starting
 * where the CLI's line:col points.
 */
function toTsDiagnostic(
  typescript: TypeScriptModule,
  sourceFile: ts.SourceFile,
  diagnostic: Diagnostic,
): ts.Diagnostic {
  const start = sourceFile.getPositionOfLineAndCharacter(diagnostic.line - 1, diagnostic.col - 1);
  return {
    file: sourceFile,
    start,
    length: spanLength(typescript, sourceFile, start),
    messageText: diagnostic.message,
    category:
      diagnostic.severity === 'error' ? typescript.DiagnosticCategory.Error : typescript.DiagnosticCategory.Warning,
    code: Number(diagnostic.code.slice('LF'.length)),
    source: TS_DIAGNOSTIC_SOURCE,
  };
}

/**
 * How much to underline. A diagnostic carries the start of the node codegen reports, not its end:
 * the widest node that starts there and ends on the same line (`Date.now()`, not the property
 * `key: …` spanning ten lines; the callee of a multi-line call), else nothing but the position.
 */
function spanLength(typescript: TypeScriptModule, sourceFile: ts.SourceFile, start: number): number {
  const line = sourceFile.getLineAndCharacterOfPosition(start).line;
  let end = start;
  const visit = (node: ts.Node): void => {
    if (node.pos > start || node.end <= start) return;
    if (
      node.getStart(sourceFile) === start &&
      node.end > end &&
      sourceFile.getLineAndCharacterOfPosition(node.end).line === line
    )
      end = node.end;
    typescript.forEachChild(node, visit);
  };
  typescript.forEachChild(sourceFile, visit);
  return end - start;
}

function describeError(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
